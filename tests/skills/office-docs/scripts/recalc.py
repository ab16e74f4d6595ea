"""Recalculates every formula of a workbook with LibreOffice (a Basic macro in the user profile),
saves it with the results cached, then reports the formulas and any error values it finds."""
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from office.soffice import run_soffice  # noqa: E402

from openpyxl import load_workbook  # noqa: E402

MACRO_DIR = os.path.expanduser("~/.config/libreoffice/4/user/basic/Standard")
MACRO = """<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE script:module PUBLIC "-//OpenOffice.org//DTD OfficeDocument 1.0//EN" "module.dtd">
<script:module xmlns:script="http://openoffice.org/2000/script" script:name="Module1" script:language="StarBasic">
    Sub RecalculateAndSave()
      ThisComponent.calculateAll()
      ThisComponent.store()
      ThisComponent.close(True)
    End Sub
</script:module>"""


def install_macro():
    if not os.path.isdir(MACRO_DIR):
        # The first start makes the user profile the macro goes into.
        run_soffice(["--headless", "--terminate_after_init"], capture_output=True, timeout=60)
        os.makedirs(MACRO_DIR, exist_ok=True)
    Path(MACRO_DIR, "Module1.xba").write_text(MACRO)


def main():
    path = str(Path(sys.argv[1]).absolute())
    install_macro()
    result = run_soffice(
        [
            "--headless",
            "--norestore",
            "vnd.sun.star.script:Standard.Module1.RecalculateAndSave?language=Basic&location=application",
            path,
        ],
        capture_output=True,
        timeout=120,
    )
    if result.returncode != 0:
        print(json.dumps({"error": result.stderr.decode(errors="replace")}))
        sys.exit(1)
    formulas = load_workbook(path)
    values = load_workbook(path, data_only=True)
    total, errors = 0, []
    for sheet in formulas.worksheets:
        for row in sheet.iter_rows():
            for cell in row:
                if isinstance(cell.value, str) and cell.value.startswith("="):
                    total += 1
                    value = values[sheet.title][cell.coordinate].value
                    if value is None or (isinstance(value, str) and value.startswith("#")):
                        errors.append(cell.coordinate)
    print(json.dumps({"status": "success" if not errors else "errors_found", "total_formulas": total, "errors": errors}))


if __name__ == "__main__":
    main()
