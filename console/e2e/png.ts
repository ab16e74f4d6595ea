// A PNG made in the test, so the browser tests attach a real image without a binary in the
// repository: a small landscape (sky, sun, hills), easy to recognise in the screenshots.
import { deflateSync } from "node:zlib";

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});

function crc32(bytes: Buffer): number {
  let crc = 0xffffffff;
  for (const byte of bytes) crc = CRC_TABLE[(crc ^ byte) & 0xff] ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}

function chunk(type: string, data: Buffer): Buffer {
  const length = Buffer.alloc(4);
  length.writeUInt32BE(data.length);
  const body = Buffer.concat([Buffer.from(type, "latin1"), data]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(body));
  return Buffer.concat([length, body, crc]);
}

/** An RGB PNG of `width` × `height` whose pixel colours `paint` gives. */
export function png(width: number, height: number, paint: (x: number, y: number) => [number, number, number]): Buffer {
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header.writeUInt8(8, 8); // bit depth
  header.writeUInt8(2, 9); // colour type: RGB
  const rows = Buffer.alloc(height * (1 + width * 3));
  for (let y = 0; y < height; y++) {
    const row = y * (1 + width * 3);
    rows[row] = 0; // filter: none
    for (let x = 0; x < width; x++) rows.set(paint(x, y), row + 1 + x * 3);
  }
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk("IHDR", header),
    chunk("IDAT", deflateSync(rows)),
    chunk("IEND", Buffer.alloc(0)),
  ]);
}

/** A landscape: a sky fading to the horizon, a yellow sun, two green hills. */
export function landscape(width: number, height: number): Buffer {
  return png(width, height, (x, y) => {
    const u = x / width;
    const v = y / height;
    const hill = 0.72 - 0.12 * Math.sin(u * Math.PI * 1.6 + 0.4);
    const far = 0.62 - 0.1 * Math.cos(u * Math.PI * 2.4);
    if (v > hill) return [46, 125, 50];
    if (v > far) return [102, 170, 90];
    const sun = Math.hypot(u - 0.75, (v - 0.28) * (height / width));
    if (sun < 0.09) return [255, 205, 40];
    const sky = Math.round(150 + 90 * v);
    return [Math.round(sky * 0.55), Math.round(sky * 0.8), 235];
  });
}
