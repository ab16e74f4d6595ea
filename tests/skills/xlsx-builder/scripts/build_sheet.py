"""Builds an expenses workbook: build_sheet.py OUT name=amount ... (a SUM formula totals them)."""
import sys

from openpyxl import Workbook

workbook = Workbook()
sheet = workbook.active
sheet.title = "Expenses"
sheet.append(["Item", "Amount"])
for item in sys.argv[2:]:
    name, amount = item.split("=", 1)
    sheet.append([name, float(amount)])
rows = sheet.max_row
sheet.append(["Total", f"=SUM(B2:B{rows})"])
workbook.save(sys.argv[1])
print(f"wrote {rows - 1} items to {sys.argv[1]}")
