// Tests of the SSE parser: blocks split anywhere across chunks, line endings, comments.
import { describe, expect, it } from "vitest";

import { parseSse, readSse, type SseEvent } from "./sse";

/** Feeds `chunks` through the parser as a stream reader would. */
function feed(chunks: string[]): { events: SseEvent[]; rest: string } {
  const events: SseEvent[] = [];
  let buffer = "";
  for (const chunk of chunks) {
    const parsed = parseSse(buffer + chunk);
    events.push(...parsed.events);
    buffer = parsed.rest;
  }
  return { events, rest: buffer };
}

describe("parseSse", () => {
  const stream =
    'event: turn.started\ndata: {"session_id":"s-1"}\n\n: keep-alive\n\nevent: message.delta\ndata: {"text":"Hola"}\n\n';

  it("parses whole blocks and keeps the unfinished tail", () => {
    const { events, rest } = parseSse(stream + "event: message.delta\ndata: {");
    expect(events).toEqual([
      { event: "turn.started", data: '{"session_id":"s-1"}' },
      { event: "message.delta", data: '{"text":"Hola"}' },
    ]);
    expect(rest).toBe("event: message.delta\ndata: {");
  });

  it("gives the same events however the stream is cut", () => {
    const whole = feed([stream]).events;
    for (let at = 0; at <= stream.length; at++) {
      expect(feed([stream.slice(0, at), stream.slice(at)]).events).toEqual(whole);
    }
    expect(feed(stream.split("")).events).toEqual(whole);
  });

  it("accepts CRLF and CR line endings, including a CRLF split between chunks", () => {
    const crlf = stream.replace(/\n/g, "\r\n");
    const expected = feed([stream]).events;
    expect(feed([crlf]).events).toEqual(expected);
    expect(feed(crlf.split("")).events).toEqual(expected);
    // A CR that ends the buffer may be half a CRLF: it counts once anything follows it.
    expect(feed([stream.replace(/\n/g, "\r")]).events).toEqual(expected.slice(0, 1));
    expect(feed([stream.replace(/\n/g, "\r"), ":"]).events).toEqual(expected);
  });

  it("joins data lines, defaults the name, reads ids and ignores blocks without data", () => {
    const { events } = parseSse("data: a\ndata:b\nid: 7\n\nevent: nothing\n\nevent\ndata\n\n");
    expect(events).toEqual([
      { event: "message", data: "a\nb", id: "7" },
      { event: "message", data: "" },
    ]);
  });
});

describe("readSse", () => {
  it("decodes UTF-8 split inside a character and dispatches an unterminated last block", async () => {
    const bytes = new TextEncoder().encode('event: message.delta\ndata: {"text":"añadir"}\n\nevent: turn.completed\ndata: {}');
    const cut = bytes.indexOf(0xc3) + 1;
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(bytes.slice(0, cut));
        controller.enqueue(bytes.slice(cut));
        controller.close();
      },
    });
    const events: SseEvent[] = [];
    await readSse(body, (event) => events.push(event));
    expect(events).toEqual([
      { event: "message.delta", data: '{"text":"añadir"}' },
      { event: "turn.completed", data: "{}" },
    ]);
  });
});
