"""Builds a small deck with python-pptx: a title slide, a list, and a bar chart drawn with shapes.

Usage: python make_deck.py OUT.pptx
"""
import sys

from pptx import Presentation
from pptx.dml.color import RGBColor
from pptx.enum.shapes import MSO_SHAPE
from pptx.util import Inches, Pt

# Regions and their sales, each bar in its own strong colour.
BARS = [("North", 96, RGBColor(0x1F, 0x4E, 0xC8)), ("South", 64, RGBColor(0xD0, 0x3A, 0x2F)),
        ("East", 80, RGBColor(0x2E, 0x9E, 0x44))]


def title_slide(deck):
    slide = deck.slides.add_slide(deck.slide_layouts[0])
    slide.shapes.title.text = "Quarterly review"
    slide.placeholders[1].text = "Made by the slides skill"


def list_slide(deck):
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = "Highlights"
    body = slide.placeholders[1].text_frame
    body.text = "Sales up 12% on the quarter"
    for line in ["Two new regions open", "Costs flat"]:
        body.add_paragraph().text = line


def bars_slide(deck):
    slide = deck.slides.add_slide(deck.slide_layouts[5])
    slide.shapes.title.text = "Sales by region"
    floor, scale = 6.8, 0.04  # inches: the bars' base line, and the height of one unit of sales
    for i, (name, value, colour) in enumerate(BARS):
        left, height = Inches(1.5 + i * 2.6), Inches(value * scale)
        bar = slide.shapes.add_shape(MSO_SHAPE.RECTANGLE, left, Inches(floor) - height, Inches(1.8), height)
        bar.fill.solid()
        bar.fill.fore_color.rgb = colour
        bar.line.fill.background()
        label = slide.shapes.add_textbox(left, Inches(floor + 0.05), Inches(1.8), Inches(0.4)).text_frame
        label.text = f"{name}: {value}"
        label.paragraphs[0].runs[0].font.size = Pt(14)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: python make_deck.py OUT.pptx")
    out = sys.argv[1]
    deck = Presentation()
    title_slide(deck)
    list_slide(deck)
    bars_slide(deck)
    deck.save(out)
    print(f"wrote {out} with {len(deck.slides)} slides")


if __name__ == "__main__":
    main()
