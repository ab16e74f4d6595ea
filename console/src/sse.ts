// A small Server-Sent Events parser (the WHATWG event-stream format) for streams read with
// fetch: EventSource cannot POST or send an Authorization header.

/** One dispatched event: its name (`message` when the block had no `event:` line) and data. */
export interface SseEvent {
  event: string;
  data: string;
  id?: string;
}

/** What is left of the buffer after the complete blocks were taken out of it. */
export interface SseParse {
  events: SseEvent[];
  rest: string;
}

/**
 * Parses every complete block of `buffer` (a block ends with a blank line; CRLF, CR and LF all end
 * a line) and returns the events with the unparsed tail. Pure, so it can be fed chunk by chunk:
 * `rest + nextChunk` is the next buffer. Comment lines (`: keep-alive`) and blocks without data
 * dispatch nothing, as the standard says.
 */
export function parseSse(buffer: string): SseParse {
  const events: SseEvent[] = [];
  let start = 0;
  let block: { event: string; data: string[]; id?: string } = { event: "", data: [] };
  let position = 0;
  while (position < buffer.length) {
    const lf = buffer.indexOf("\n", position);
    const cr = buffer.indexOf("\r", position);
    let end: number;
    let next: number;
    if (cr !== -1 && (lf === -1 || cr < lf)) {
      // A CR at the very end may be the first half of a CRLF still on its way.
      if (cr === buffer.length - 1) break;
      end = cr;
      next = buffer[cr + 1] === "\n" ? cr + 2 : cr + 1;
    } else if (lf !== -1) {
      end = lf;
      next = lf + 1;
    } else {
      break;
    }
    const line = buffer.slice(position, end);
    position = next;
    if (line === "") {
      if (block.data.length > 0) {
        const event: SseEvent = { event: block.event || "message", data: block.data.join("\n") };
        if (block.id !== undefined) event.id = block.id;
        events.push(event);
      }
      block = { event: "", data: [] };
      start = position;
      continue;
    }
    if (line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") block.event = value;
    else if (field === "data") block.data.push(value);
    else if (field === "id" && !value.includes("\0")) block.id = value;
  }
  // An incomplete block is parsed again once the rest of it has arrived.
  return { events, rest: buffer.slice(start) };
}

/**
 * Reads an event stream to its end, calling `onEvent` for each event as it arrives. A block left
 * unterminated when the stream ends is dispatched too (a server that closes right after its last
 * `data:` line loses nothing).
 */
export async function readSse(body: ReadableStream<Uint8Array>, onEvent: (event: SseEvent) => void): Promise<void> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      const parsed = parseSse(buffer);
      buffer = parsed.rest;
      parsed.events.forEach(onEvent);
    }
    buffer += decoder.decode();
    if (buffer.trim() !== "") parseSse(buffer.endsWith("\n") ? buffer + "\n" : buffer + "\n\n").events.forEach(onEvent);
  } finally {
    reader.releaseLock();
  }
}
