"""Converts a Markdown draft into a Word document: md_a_docx.py IN.md OUT.docx.

With python-docx (in the sandbox image): `#`, `##` and `###` lines become Word's own Heading 1-3
styles (so Word's navigation pane and table of contents see them), `- ` lines become list
bullets, **bold** runs stay bold, every other line is a paragraph.
"""
import re
import sys

from docx import Document


def add_runs(paragraph, text):
    for part in re.split(r"(\*\*[^*]+\*\*)", text):
        if not part:
            continue
        bold = part.startswith("**") and part.endswith("**")
        paragraph.add_run(part[2:-2] if bold else part).bold = bold or None


def main():
    source, target = sys.argv[1], sys.argv[2]
    with open(source, encoding="utf-8") as handle:
        lines = [line.rstrip("\n") for line in handle if line.strip()]
    document = Document()
    for line in lines:
        heading = re.match(r"^(#{1,3})\s+(.*)$", line)
        bullet = re.match(r"^[-*]\s+(.*)$", line)
        if heading:
            document.add_heading(heading.group(2).replace("**", ""), level=len(heading.group(1)))
        elif bullet:
            add_runs(document.add_paragraph(style="List Bullet"), bullet.group(1))
        else:
            add_runs(document.add_paragraph(), line)
    document.save(target)
    print(f"{target}: {len(lines)} párrafos")


if __name__ == "__main__":
    main()
