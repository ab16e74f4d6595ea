// Tests of the composer's attachments: the names files get, and how each upload stands.
import { describe, expect, it } from "vitest";

import {
  addFiles,
  attachmentStatus,
  cleanName,
  failed,
  fileKind,
  MAX_ATTACHMENTS,
  pastedName,
  progressed,
  readyRefs,
  removeAttachment,
  sentFiles,
  uniqueName,
  uploaded,
  uploading,
  type PendingAttachment,
} from "./attachments";

const png = (name: string, size = 100) => ({ name, size, type: "image/png" });

function ids() {
  let n = 0;
  return () => `a${++n}`;
}

describe("attachment names", () => {
  it("keeps a file's own name, cleaned into one workspace segment", () => {
    expect(cleanName("scan.jpg")).toBe("scan.jpg");
    expect(cleanName("C:\\fotos\\dni.jpg")).toBe("dni.jpg");
    expect(cleanName("  acta final.pdf ")).toBe("acta final.pdf");
    expect(cleanName("50%41.png")).toBe("50_41.png");
    expect(cleanName("a\u0000b\nc.txt")).toBe("abc.txt");
    expect(cleanName("..")).toBe("file");
    expect(cleanName("")).toBe("file");
  });

  it("keeps a long name within 256 bytes, its extension whole", () => {
    const name = cleanName(`${"é".repeat(200)}.png`);
    expect(new TextEncoder().encode(name).length).toBeLessThanOrEqual(256);
    expect(name.endsWith(".png")).toBe(true);
  });

  it("gives a duplicate a suffix before its extension", () => {
    expect(uniqueName("scan.jpg", [])).toBe("scan.jpg");
    expect(uniqueName("scan.jpg", ["scan.jpg"])).toBe("scan-2.jpg");
    expect(uniqueName("scan.jpg", ["scan.jpg", "scan-2.jpg"])).toBe("scan-3.jpg");
    expect(uniqueName("LEEME", ["LEEME"])).toBe("LEEME-2");
  });

  it("names a pasted image by the time it was pasted, with its type's extension", () => {
    const at = new Date(2026, 0, 5, 9, 7, 3);
    expect(pastedName(at)).toBe("pasted-20260105-090703.png");
    expect(pastedName(at, "image/jpeg")).toBe("pasted-20260105-090703.jpg");
  });

  it("tells images, PDFs and other files apart by type, or by name without one", () => {
    expect(fileKind("image/webp", "x")).toBe("image");
    expect(fileKind("application/pdf", "x")).toBe("pdf");
    expect(fileKind("", "foto.JPG")).toBe("image");
    expect(fileKind("", "acta.pdf")).toBe("pdf");
    expect(fileKind("text/plain", "notas.txt")).toBe("other");
  });
});

describe("attachment state", () => {
  it("adds files as uploading, each named apart, up to ten", () => {
    const first = addFiles([], [png("a.png"), png("a.png")], "s-1", ids());
    expect(first.list.map((item) => [item.name, item.state, item.kind, item.sessionId])).toEqual([
      ["a.png", "uploading", "image", "s-1"],
      ["a-2.png", "uploading", "image", "s-1"],
    ]);
    const many = Array.from({ length: 12 }, (_, index) => png(`f${index}.png`));
    const full = addFiles(first.list, many, "s-1", ids());
    expect(full.list).toHaveLength(MAX_ATTACHMENTS);
    expect(full.added).toHaveLength(8);
    expect(full.refused).toBe(4);
  });

  it("goes from uploading to ready or failed; the message waits while one uploads and carries the ready ones", () => {
    let list: PendingAttachment[] = addFiles([], [png("sello.png", 2048), png("falso.png", 21)], "s-1", ids()).list;
    const [sello, falso] = list;
    expect(uploading(list)).toBe(true);
    list = progressed(list, sello.id, 0.5);
    expect(attachmentStatus(list[0])).toBe("uploading 50%");
    list = uploaded(list, sello.id, { upload: "ab".repeat(32), name: "sello.png", size: 2048, media_type: "image/png" });
    expect(uploading(list)).toBe(true);
    list = failed(list, falso.id, "`falso.png` is named as image/png but its bytes are text");
    expect(uploading(list)).toBe(false);
    expect(attachmentStatus(list[1])).toBe("failed: `falso.png` is named as image/png but its bytes are text");
    // A late progress report does not bring a finished upload back.
    expect(progressed(list, falso.id, 0.9)).toBe(list);
    expect(readyRefs(list)).toEqual([{ upload: "ab".repeat(32), name: "sello.png" }]);
    expect(sentFiles(list)).toEqual([{ name: "sello.png", size: 2048, type: "image/png" }]);
    expect(removeAttachment(list, sello.id).map((item) => item.name)).toEqual(["falso.png"]);
  });
});
