"""Writes a .docx: make_docx.py OUT TITLE PARAGRAPH..."""
import sys

from docx import Document

document = Document()
document.add_heading(sys.argv[2], level=1)
for paragraph in sys.argv[3:]:
    document.add_paragraph(paragraph)
document.save(sys.argv[1])
print(f"wrote {sys.argv[1]}")
