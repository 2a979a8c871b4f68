import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { join } from "node:path";
import { packageRoot } from "../config/project-paths.js";

/** A file the page is made of, as served. */
export interface PageAsset {
  contentType: string;
  body: Buffer;
}

/** Path of the live page's snapshot endpoint (`LiveSnapshotJson`). */
export const SNAPSHOT_PATH = "/ui/snapshot.json";

/**
 * Every URL of the live page and the file behind it: the static page in the package's `web/` folder
 * and uPlot's browser build from its npm package (nothing from a CDN). A fixed list, so no request
 * path ever reaches the file system.
 */
function assetFiles(): Record<string, { file: string; contentType: string }> {
  const web = join(packageRoot(), "web");
  const uplot = createRequire(import.meta.url);
  return {
    "/": { file: join(web, "index.html"), contentType: "text/html; charset=utf-8" },
    "/ui/app.js": { file: join(web, "app.js"), contentType: "text/javascript; charset=utf-8" },
    "/ui/style.css": { file: join(web, "style.css"), contentType: "text/css; charset=utf-8" },
    "/ui/uplot.js": {
      file: uplot.resolve("uplot/dist/uPlot.iife.min.js"),
      contentType: "text/javascript; charset=utf-8",
    },
    "/ui/uplot.css": {
      file: uplot.resolve("uplot/dist/uPlot.min.css"),
      contentType: "text/css; charset=utf-8",
    },
  };
}

/**
 * The page's headers: it may load only from this server and connect only to it, so the browser
 * itself keeps the page from sending anything elsewhere.
 */
export const PAGE_HEADERS = {
  "content-security-policy":
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "cache-control": "no-store",
} as const;

/** The live page's static files, read once on first request and kept in memory (tens of KB). */
export class LivePage {
  private readonly files = assetFiles();
  private readonly loaded = new Map<string, Promise<PageAsset>>();

  /** The asset served at `path`, or undefined when the page has none there. */
  asset(path: string): Promise<PageAsset> | undefined {
    const entry = this.files[path === "/index.html" ? "/" : path];
    if (!entry) return undefined;
    let p = this.loaded.get(entry.file);
    if (!p) {
      p = readFile(entry.file).then((body) => ({ contentType: entry.contentType, body }));
      // A failed read (file missing from the package) is retried on the next request.
      p.catch(() => this.loaded.delete(entry.file));
      this.loaded.set(entry.file, p);
    }
    return p;
  }
}
