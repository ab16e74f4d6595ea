"""Converts a Markdown draft into a minimal Word document: md_a_docx.py IN.md OUT.docx.

Only the standard library: a .docx is a zip of a few XML parts. Headings (#) become Word
headings, **bold** runs stay bold, every other line is a paragraph.
"""
import re
import sys
import zipfile
from xml.sax.saxutils import escape

CONTENT_TYPES = """<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">
<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>
<Default Extension="xml" ContentType="application/xml"/>
<Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>
</Types>"""
RELS = """<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">
<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/>
</Relationships>"""
NS = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'


def runs(text):
    parts = re.split(r"(\*\*[^*]+\*\*)", text)
    out = []
    for part in parts:
        if not part:
            continue
        bold = part.startswith("**") and part.endswith("**")
        body = escape(part[2:-2] if bold else part)
        props = "<w:rPr><w:b/></w:rPr>" if bold else ""
        out.append(f'<w:r>{props}<w:t xml:space="preserve">{body}</w:t></w:r>')
    return "".join(out)


def paragraph(line):
    heading = re.match(r"^(#{1,3})\s+(.*)$", line)
    if heading:
        size = {1: 36, 2: 30, 3: 26}[len(heading.group(1))]
        text = escape(heading.group(2))
        return f'<w:p><w:r><w:rPr><w:b/><w:sz w:val="{size}"/></w:rPr><w:t xml:space="preserve">{text}</w:t></w:r></w:p>'
    return f"<w:p>{runs(line)}</w:p>"


def main():
    source, target = sys.argv[1], sys.argv[2]
    with open(source, encoding="utf-8") as handle:
        lines = [line.rstrip("\n") for line in handle]
    body = "".join(paragraph(line) for line in lines if line.strip())
    document = f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document {NS}><w:body>{body}</w:body></w:document>'
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as docx:
        docx.writestr("[Content_Types].xml", CONTENT_TYPES)
        docx.writestr("_rels/.rels", RELS)
        docx.writestr("word/document.xml", document)
    print(f"{target}: {len([l for l in lines if l.strip()])} párrafos")


if __name__ == "__main__":
    main()
