"""Renders a deck's slides as a labelled grid of thumbnails, to look at a deck in one picture.

Usage: python thumbnail.py DECK.pptx [PREFIX] [--cols N]

LibreOffice (headless) converts the deck to PDF, pdftoppm renders each page, and Pillow lays the
pages out left to right and top to bottom, each over its slide number. Writes PREFIX.jpg (default
`thumbnails.jpg`); a deck of more slides than one grid holds gives PREFIX-1.jpg, PREFIX-2.jpg, ...
Prints what it wrote, with each grid's size.
"""
import argparse
import os
import subprocess
import sys
import tempfile

from PIL import Image, ImageDraw, ImageFont

THUMB_WIDTH = 320  # pixels of one slide in the grid
GAP = 16  # pixels around and between the cells
LABEL_HEIGHT = 28  # pixels under each slide for its number
ROWS_PER_GRID = 4
RENDER_DPI = 60  # a 10-inch slide is 600 pixels wide: enough for a 320-pixel thumbnail


def run(command, **kwargs):
    done = subprocess.run(command, capture_output=True, text=True, **kwargs)
    if done.returncode != 0:
        sys.exit(f"{command[0]} failed ({done.returncode}): {done.stderr.strip() or done.stdout.strip()}")


def deck_to_pdf(deck, scratch):
    """The deck as a PDF, by LibreOffice with a profile of its own (no display, no home needed)."""
    profile = "file://" + os.path.join(scratch, "profile")
    env = dict(os.environ, SAL_USE_VCLPLUGIN="svp")
    run(["soffice", f"-env:UserInstallation={profile}", "--headless", "--convert-to", "pdf", "--outdir", scratch,
         deck], env=env)
    pdf = os.path.join(scratch, os.path.splitext(os.path.basename(deck))[0] + ".pdf")
    if not os.path.exists(pdf):
        sys.exit(f"LibreOffice wrote no PDF of {deck}")
    return pdf


def pdf_to_pages(pdf, scratch):
    """One JPEG per page, in page order (pdftoppm pads the numbers to the page count's width)."""
    run(["pdftoppm", "-jpeg", "-r", str(RENDER_DPI), pdf, os.path.join(scratch, "page")])
    pages = [name for name in os.listdir(scratch) if name.startswith("page-") and name.endswith(".jpg")]
    pages.sort(key=lambda name: int(name[len("page-"):-len(".jpg")]))
    return [os.path.join(scratch, name) for name in pages]


def thumbnail(path):
    with Image.open(path) as page:
        height = round(page.height * THUMB_WIDTH / page.width)
        return page.convert("RGB").resize((THUMB_WIDTH, height), Image.LANCZOS)


def grid(thumbs, first_number, cols):
    cols = min(cols, len(thumbs))
    rows = -(-len(thumbs) // cols)
    cell_height = max(thumb.height for thumb in thumbs) + LABEL_HEIGHT
    sheet = Image.new("RGB", (cols * THUMB_WIDTH + (cols + 1) * GAP, rows * cell_height + (rows + 1) * GAP), "white")
    draw = ImageDraw.Draw(sheet)
    font = ImageFont.load_default(size=16)
    for index, thumb in enumerate(thumbs):
        row, col = divmod(index, cols)
        x, y = GAP + col * (THUMB_WIDTH + GAP), GAP + row * (cell_height + GAP)
        sheet.paste(thumb, (x, y))
        draw.rectangle([x - 1, y - 1, x + thumb.width, y + thumb.height], outline=(150, 150, 150))
        label = f"Slide {first_number + index}"
        left, top, right, bottom = draw.textbbox((0, 0), label, font=font)
        draw.text((x + (THUMB_WIDTH - (right - left)) // 2, y + thumb.height + (LABEL_HEIGHT - (bottom - top)) // 2),
                  label, fill="black", font=font)
    return sheet


def main():
    parser = argparse.ArgumentParser(description="Render a deck's slides as a grid of thumbnails.")
    parser.add_argument("deck")
    parser.add_argument("prefix", nargs="?", default="thumbnails")
    parser.add_argument("--cols", type=int, default=3, choices=range(1, 7), metavar="1-6")
    args = parser.parse_args()
    if not os.path.exists(args.deck):
        sys.exit(f"no such deck: {args.deck}")
    with tempfile.TemporaryDirectory() as scratch:
        pages = pdf_to_pages(deck_to_pdf(os.path.abspath(args.deck), scratch), scratch)
        if not pages:
            sys.exit(f"{args.deck} has no slides to render")
        thumbs = [thumbnail(page) for page in pages]
    per_grid = args.cols * ROWS_PER_GRID
    chunks = [thumbs[start:start + per_grid] for start in range(0, len(thumbs), per_grid)]
    for number, chunk in enumerate(chunks, start=1):
        out = f"{args.prefix}.jpg" if len(chunks) == 1 else f"{args.prefix}-{number}.jpg"
        sheet = grid(chunk, (number - 1) * per_grid + 1, args.cols)
        sheet.save(out, quality=90)
        print(f"wrote {out}: {len(chunk)} slides, {sheet.width}x{sheet.height}")


if __name__ == "__main__":
    main()
