// Tests of the request helpers that need no server: ids, file, upload and shown routes, error bodies.
import { describe, expect, it } from "vitest";

import { errorFromBody, fileRoute, newSessionId, shownRoute, uploadRoute } from "./api";

describe("request helpers", () => {
  it("makes session ids the API accepts, different each time", () => {
    const ids = new Set(Array.from({ length: 100 }, newSessionId));
    expect(ids.size).toBe(100);
    for (const id of ids) expect(id).toMatch(/^s-[A-Za-z0-9_-]{20}$/);
  });

  it("encodes each segment of a workspace path for the file route", () => {
    expect(fileRoute("s-1", "/workspace/notas/plan final.md")).toBe("/api/sessions/s-1/files/notas/plan%20final.md");
    expect(fileRoute("s-1", "/workspace/café#1.txt")).toBe("/api/sessions/s-1/files/caf%C3%A9%231.txt");
  });

  it("encodes an upload's name as one segment, and names a shown file by its hash", () => {
    expect(uploadRoute("s-1", "acta final.pdf")).toBe("/api/sessions/s-1/uploads/acta%20final.pdf");
    expect(uploadRoute("s-1", "a#b?.png")).toBe("/api/sessions/s-1/uploads/a%23b%3F.png");
    expect(shownRoute("s-1", "ab".repeat(32))).toBe(`/api/sessions/s-1/shown/${"ab".repeat(32)}`);
  });

  it("reads the API's error body, the gateway's message, or only the status", () => {
    const api = errorFromBody(400, { error: { code: "unknown_skill", message: "no skill `/x`" } });
    expect([api.status, api.code, api.message]).toEqual([400, "unknown_skill", "no skill `/x`"]);
    expect(errorFromBody(401, { message: "Unauthorized" }).message).toBe("Unauthorized (401)");
    expect(errorFromBody(502, null).message).toBe("request failed with status 502");
  });
});
