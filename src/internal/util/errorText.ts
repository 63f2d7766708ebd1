/**
 * Bounded, never-throwing error texts.
 *
 * Errors about poison records are built from untrusted input: a parse error's
 * tree embeds the value it failed on, so formatting it can take as long, be
 * as large, or recurse as deeply as the record is (a JSON value of thousands
 * of nested `[` overflows the stack in Effect's formatter). Every text here
 * is at most `maxLength` characters, and formatting never throws: a formatter
 * that fails falls back to a short description of the issue (its kind, path
 * and message).
 *
 * @internal
 */
import { ParseResult } from "effect"

/** The default bound of an error text, in characters (UTF-16 code units). */
export const maxLength = 1024

/** How deep the fallback description follows an issue tree. */
const maxDepth = 32

/**
 * `text` cut to at most `max` characters, ending with a marker that says how
 * many characters were cut. Never splits a surrogate pair.
 */
export const truncate = (text: string, max: number = maxLength): string => {
  if (text.length <= max) return text
  const marker = (cut: number) => `… [${cut} more characters]`
  let end = Math.max(0, max - marker(text.length).length)
  const code = text.charCodeAt(end - 1)
  if (code >= 0xd800 && code <= 0xdbff) end--
  return text.slice(0, end) + marker(text.length - end)
}

/** Runs `f`, or `fallback` if it throws (a RangeError of a deep recursion included). */
const attempt = (f: () => string, fallback: () => string): string => {
  try {
    const text = f()
    return typeof text === "string" ? text : fallback()
  } catch {
    try {
      return fallback()
    } catch {
      return "(an error that cannot be described)"
    }
  }
}

const pathText = (path: ParseResult.Pointer["path"]): string =>
  (Array.isArray(path) ? path : [path]).map((key) => `[${typeof key === "string" ? JSON.stringify(key) : String(key)}]`)
    .join("")

/**
 * A short description of an issue tree without formatting its values: the
 * leaf's kind, the path to it and the innermost message, found by following
 * the first sub-issue (iteratively, at most `maxDepth` levels).
 */
export const describeIssue = (issue: ParseResult.ParseIssue): string => {
  let current: ParseResult.ParseIssue = issue
  let path = ""
  let message: string | undefined
  for (let depth = 0; depth < maxDepth; depth++) {
    if ("message" in current && typeof current.message === "string") message = current.message
    if (current._tag === "Pointer") {
      path += pathText(current.path)
      current = current.issue
    } else if (current._tag === "Refinement" || current._tag === "Transformation") {
      current = current.issue
    } else if (current._tag === "Composite") {
      const issues: ParseResult.Composite["issues"] = current.issues
      const first: ParseResult.ParseIssue | undefined = Array.isArray(issues) ? issues[0] : issues
      if (first === undefined) break
      current = first
    } else {
      break
    }
  }
  const expected = "ast" in current ? attempt(() => truncate(String(current.ast), 200), () => "") : ""
  return truncate(
    `${current._tag} issue${path === "" ? "" : ` at ${path}`}${expected === "" ? "" : `, expected ${expected}`}` +
      (message === undefined ? "" : `: ${message}`) +
      " (the full description is too deep or too large to format)"
  )
}

const formatted = new WeakMap<ParseResult.ParseError, string>()

/**
 * A parse error's text: Effect's tree formatting when it succeeds, else the
 * short description; at most `maxLength` characters. Remembered per error.
 */
export const formatParseError = (error: ParseResult.ParseError): string => {
  const known = formatted.get(error)
  if (known !== undefined) return known
  const text = truncate(
    attempt(() => ParseResult.TreeFormatter.formatIssueSync(error.issue), () => describeIssue(error.issue))
  )
  formatted.set(error, text)
  return text
}

/**
 * A parse error whose texts (`message`, `toString`, `toJSON`, inspection) are
 * bounded and never throw: Effect's own `ParseError` formats its whole tree
 * whenever it is printed, logged or rendered in a `Cause`.
 */
class BoundedParseError extends ParseResult.ParseError {
  override get message(): string {
    return formatParseError(this)
  }
  override toString(): string {
    return formatParseError(this)
  }
}

/** `error` as a `ParseError` with bounded, never-throwing texts (the same issue). */
export const bounded = (error: ParseResult.ParseError): ParseResult.ParseError =>
  error instanceof BoundedParseError ? error : new BoundedParseError({ issue: error.issue })

/**
 * Any failure as bounded text: `Name: message` for an `Error`, the string
 * itself, or its JSON. Never throws, whatever the value's getters do.
 */
export const describe = (error: unknown, max: number = maxLength): string =>
  truncate(
    attempt(
      () => {
        if (error instanceof Error) return `${error.name}: ${error.message}`
        if (typeof error === "string") return error
        const json = JSON.stringify(error)
        return json === undefined ? String(error) : json
      },
      () =>
        error instanceof Error
          ? attempt(() => `${String(error.name)} (its message cannot be formatted)`, () => "Error")
          : `a failure of type ${typeof error} that cannot be formatted`
    ),
    max
  )
