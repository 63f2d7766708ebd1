/**
 * The documentation site: VitePress over docs/ as the pages are (`npm run docs:site` builds it
 * into docs/.vitepress/dist, offline; test/unit/docs-site.test.ts opens it in Chromium).
 *
 * - docs/README.md, the index, is the home page; its sections and links are the sidebar, so a
 *   page listed there is in the sidebar with no second list to keep.
 * - A link to a file that is not a page (../README.md, ../src/Topic.ts, snippets/word-count.ts)
 *   points at the file in the repository, since the site holds the pages of docs/ only.
 * - Search is VitePress's local search (an index built with the site, no service).
 * - Fence attributes (```ts prelude=word-count, continues, file=..., no-check) are for
 *   scripts/check-docs.mjs; the site shows the block by its language. Mermaid diagrams show as
 *   their source.
 */
import { readFileSync } from "node:fs"
import { dirname, join, normalize } from "node:path"
import { fileURLToPath } from "node:url"
import { defineConfig, type DefaultTheme } from "vitepress"

const docs = join(dirname(fileURLToPath(import.meta.url)), "..")

/** The repository a link out of docs/ goes to (the project URL of CHANGELOG.md). */
const repository = "https://github.com/skein/skein/blob/main/"

/** GitHub's anchor of a heading's text (markdown-it-anchor numbers repeats -1, -2 as GitHub does). */
const githubSlug = (heading: string): string =>
  heading.trim().toLowerCase().replace(/<[^>]*>/g, "").replace(/[^\p{L}\p{N}\s_-]/gu, "").replace(/\s/g, "-")

/** docs/README.md's `## Section` headings and their `- [Title](page.md)` items. */
const sidebar = (): DefaultTheme.SidebarItem[] => {
  const index = readFileSync(join(docs, "README.md"), "utf8")
  const sections: DefaultTheme.SidebarItem[] = []
  let items: DefaultTheme.SidebarItem[] = []
  for (const line of index.split("\n")) {
    const heading = /^## (.+)$/.exec(line)
    if (heading !== null) {
      items = []
      sections.push({ text: heading[1] ?? "", items })
      continue
    }
    const item = /^- \[([^\]]+)\]\(([\w-]+)\.md\)/.exec(line)
    if (item !== null && sections.length > 0) {
      const link = `/${item[2]}`
      if (!items.some((existing) => existing.link === link)) items.push({ text: item[1] ?? "", link })
    }
  }
  return [{ text: "Overview", items: [{ text: "Documentation index", link: "/" }] }, ...sections]
}

export default defineConfig({
  title: "Skein",
  description: "Exactly-once Kafka stream processing for TypeScript, built on Effect",
  cleanUrls: false,
  // The index is the home page; the deno doc output (npm run docs, gitignored) is not a page.
  rewrites: { "README.md": "index.md" },
  srcExclude: ["api/**"],
  lastUpdated: false,
  // No icon yet: an empty one, so that browsers ask for no /favicon.ico (a 404 in the console).
  head: [["link", { rel: "icon", href: "data:," }]],
  themeConfig: {
    sidebar: sidebar(),
    nav: [
      { text: "Getting started", link: "/getting-started" },
      { text: "Concepts", link: "/concepts" },
      { text: "Configuration", link: "/configuration" },
      { text: "API", link: "/api" }
    ],
    search: { provider: "local" },
    outline: { level: [2, 3] }
  },
  markdown: {
    // GitHub's heading anchors, the ones the pages link to (and scripts/check-docs.mjs checks).
    anchor: { slugify: githubSlug },
    config: (md) => {
      // Links out of docs/ go to the repository (a core rule: VitePress then sees an external link).
      md.core.ruler.push("skein-repository-links", (state) => {
        const page: unknown = state.env?.relativePath
        if (typeof page !== "string") return
        for (const block of state.tokens) {
          for (const token of block.children ?? []) {
            if (token.type !== "link_open") continue
            const href = token.attrGet("href")
            if (href === null || /^[a-z]+:|^#|^\//i.test(href)) continue
            const [path = "", anchor] = href.split("#")
            const target = normalize(join(dirname(page === "index.md" ? "README.md" : page), path))
            // A page of the site (or an anchor of this one) stays; any other file is the repository's.
            if (path === "" || (path.endsWith(".md") && !target.startsWith(".."))) continue
            const file = join("docs", target).split("\\").join("/")
            token.attrSet("href", `${repository}${file}${anchor === undefined ? "" : `#${anchor}`}`)
          }
        }
      })
    }
  }
})
