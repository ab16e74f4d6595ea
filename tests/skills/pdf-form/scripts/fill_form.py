"""Fills a PDF form's text fields from a JSON file of field values: fill_form.py FORM VALUES OUT."""
import json
import os
import sys

from pypdf import PdfReader, PdfWriter

skill_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
form = sys.argv[1] if os.path.isabs(sys.argv[1]) else os.path.join(skill_dir, sys.argv[1])
with open(sys.argv[2], encoding="utf-8") as handle:
    values = json.load(handle)
writer = PdfWriter(clone_from=PdfReader(form))
writer.update_page_form_field_values(writer.pages[0], values, auto_regenerate=False)
with open(sys.argv[3], "wb") as out:
    writer.write(out)
print(f"filled {len(values)} fields into {sys.argv[3]}")
