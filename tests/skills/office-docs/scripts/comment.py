"""Adds a comment to an unpacked .docx: copies the skill's comments template into word/ (as
published skills do with shutil.copy), then edits the copy."""
import shutil
import sys
from pathlib import Path

unpacked = Path(sys.argv[1])
text = sys.argv[2]
template = Path(__file__).parent.parent / "templates" / "comments.xml"
target = unpacked / "word" / "comments.xml"
shutil.copy(template, target)
content = target.read_text()
comment = f'<w:comment w:id="0" w:author="Agent"><w:p><w:r><w:t>{text}</w:t></w:r></w:p></w:comment>'
target.write_text(content.replace("</w:comments>", comment + "</w:comments>"))
print(f"added a comment to {target}")
