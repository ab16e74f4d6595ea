// Vite build of the console page: preact's JSX through esbuild, relative asset paths so the
// page works wherever `cargo xtask console` serves it; `npm run dev` proxies the API to a
// running console server (CONSOLE_SERVER, default http://127.0.0.1:8765).
import { defineConfig } from "vite";

const server = process.env.CONSOLE_SERVER ?? "http://127.0.0.1:8765";

export default defineConfig({
  base: "./",
  esbuild: { jsx: "automatic", jsxImportSource: "preact" },
  build: { outDir: "dist", emptyOutDir: true, target: "es2022" },
  server: {
    proxy: {
      // The console answers only requests addressed to itself (its Host check), so the proxy
      // rewrites Host to the console's address.
      "/api": { target: server, changeOrigin: true },
      "/console": { target: server, changeOrigin: true },
    },
  },
  test: { environment: "node", include: ["src/**/*.test.ts"] },
});
