/**
 * A built static site served from a folder on a free local port, as a host serves it: a path
 * is its file (a folder its index.html), anything else is the site's 404.html with status 404.
 */
import { existsSync, readFileSync, statSync } from "node:fs"
import { createServer, type Server } from "node:http"
import { extname, join, normalize, sep } from "node:path"

const types: Readonly<Record<string, string>> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".json": "application/json",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".woff2": "font/woff2",
  ".txt": "text/plain; charset=utf-8"
}

/** A running server: its origin (http://127.0.0.1:port) and how to stop it. */
export interface StaticSite {
  readonly origin: string
  readonly close: () => Promise<void>
}

/** Serves `root` on 127.0.0.1 at a free port. */
export const serveStatic = (root: string): Promise<StaticSite> => {
  const file = (urlPath: string): string | undefined => {
    const path = normalize(join(root, decodeURIComponent(urlPath)))
    if (path !== root && !path.startsWith(root + sep)) return undefined
    if (existsSync(path) && statSync(path).isDirectory()) {
      const index = join(path, "index.html")
      return existsSync(index) ? index : undefined
    }
    return existsSync(path) ? path : undefined
  }
  const server: Server = createServer((request, response) => {
    const found = file(new URL(request.url ?? "/", "http://localhost").pathname)
    const notFound = join(root, "404.html")
    const [status, path] = found !== undefined ? [200, found] : [404, existsSync(notFound) ? notFound : undefined]
    response.writeHead(status, { "content-type": types[extname(path ?? ".txt")] ?? "application/octet-stream" })
    response.end(path === undefined ? "not found" : readFileSync(path))
  })
  return new Promise((resolve, reject) => {
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      if (address === null || typeof address === "string") {
        reject(new Error(`the static server listens on ${String(address)}, not a TCP port`))
        return
      }
      resolve({
        origin: `http://127.0.0.1:${address.port}`,
        close: () => new Promise<void>((done) => server.close(() => done()))
      })
    })
  })
}
