// The bytes of the files the open session showed the model, fetched with the user's token (an
// <img> cannot send it) into object URLs, each once per session, and let go when the session closes.

import { createContext } from "preact";
import { useEffect, useMemo } from "preact/hooks";

import type { Api } from "../api";

/** An object URL of a shown file's bytes, by their SHA-256. */
export type ShownLoader = (sha256: string) => Promise<string>;

/** The open session's loader; `null` with no session open. */
export const ShownLoaderContext = createContext<ShownLoader | null>(null);

export function useShownLoader(api: Api | null, sessionId: string | null): ShownLoader | null {
  // A cache of its own for each session, so a closed session's URLs are revoked without touching
  // those the next one has begun to load.
  const store = useMemo(() => ({ urls: new Map<string, Promise<string>>(), made: [] as string[], closed: false }), [api, sessionId]);
  useEffect(
    () => () => {
      store.closed = true;
      store.made.forEach((url) => URL.revokeObjectURL(url));
    },
    [store],
  );
  return useMemo(() => {
    if (!api || !sessionId) return null;
    return (sha256: string) => {
      const known = store.urls.get(sha256);
      if (known) return known;
      const loading = api.shown(sessionId, sha256).then((blob) => {
        const url = URL.createObjectURL(blob);
        if (store.closed) {
          URL.revokeObjectURL(url);
          throw new Error("the session was closed");
        }
        store.made.push(url);
        return url;
      });
      // A failed load is tried again the next time the file is shown.
      loading.catch(() => store.urls.delete(sha256));
      store.urls.set(sha256, loading);
      return loading;
    };
  }, [store]);
}
