"""Builds a small budget with openpyxl: values and =SUM formulas, no cached results."""
import sys

from openpyxl import Workbook

out = sys.argv[1]
wb = Workbook()
ws = wb.active
ws.title = "Budget"
ws.append(["Item", "Amount"])
for item, amount in [("notary", 600.5), ("registry", 120), ("taxes", 1500)]:
    ws.append([item, amount])
ws.append(["Total", "=SUM(B2:B4)"])
ws.append(["Average", "=AVERAGE(B2:B4)"])
wb.save(out)
print(f"wrote {out} with 2 formulas")
