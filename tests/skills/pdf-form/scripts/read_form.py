"""Prints a PDF form's text fields and their values as JSON."""
import json
import sys

from pypdf import PdfReader

fields = PdfReader(sys.argv[1]).get_form_text_fields()
print(json.dumps(fields, ensure_ascii=False, sort_keys=True))
