// Builds a Word document with docx-js (the `docx` npm package): a real Heading 1 and two paragraphs.
const fs = require("fs");
const { Document, Packer, Paragraph, HeadingLevel, TextRun } = require("docx");

const [out, title] = process.argv.slice(2);
const doc = new Document({
  sections: [
    {
      children: [
        new Paragraph({ text: title, heading: HeadingLevel.HEADING_1 }),
        new Paragraph({ children: [new TextRun({ text: "Made with docx-js under node ", bold: true }), new TextRun(process.version)] }),
        new Paragraph("Second paragraph."),
      ],
    },
  ],
});
Packer.toBuffer(doc).then((buffer) => {
  fs.writeFileSync(out, buffer);
  console.log(`wrote ${out}`);
});
