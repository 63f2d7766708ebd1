/**
 * Whether a value survives JSON unchanged, and whether a Schema's encode is
 * undone by its decode by construction: together they prove that a stored
 * state reads back without parsing it and decoding it again.
 *
 * @internal
 */
import { SchemaAST } from "effect"

const isPlainObject = (value: object): value is Readonly<Record<string, unknown>> =>
  Object.getPrototypeOf(value) === Object.prototype

/**
 * `JSON.parse(JSON.stringify(value))` is a value equal to `value` (the same
 * strings, finite numbers other than `-0`, booleans, nulls, plain arrays
 * without holes or `undefined`, plain objects of such values): a Schema that
 * decodes `value` decodes its stored text the same way. `false` says nothing
 * (a `NaN`, an `undefined` property, a `Date`, a class instance, a `-0`): the
 * caller reads the text back instead. `value` is acyclic (`JSON.stringify`
 * accepted it).
 */
export const exact = (value: unknown): boolean => {
  switch (typeof value) {
    case "string":
    case "boolean":
      return true
    case "number":
      // JSON has no NaN or Infinity (stored as null) and stores -0 as 0.
      return Number.isFinite(value) && (value !== 0 || 1 / value > 0)
    case "object": {
      if (value === null) return true
      if (Array.isArray(value)) {
        if (Object.getPrototypeOf(value) !== Array.prototype) return false
        // A hole or an undefined element is stored as null.
        for (let i = 0; i < value.length; i++) if (!exact(value[i])) return false
        return true
      }
      if (!isPlainObject(value)) return false
      // Own enumerable string keys, as JSON.stringify reads them (a plain object inherits none).
      for (const key in value) if (!exact(value[key])) return false
      return true
    }
    default:
      // undefined, a function, a symbol (dropped or null in JSON), a bigint (JSON.stringify throws).
      return false
  }
}

/**
 * Whether `ast`'s encoded side is read by the same nodes as its type side:
 * no transformation and no declaration (their encode and decode are functions
 * not known to be inverses), no symbol keys (JSON drops them). Then a value
 * `ast` encoded is one its decode reads: the encode checked it against the
 * same nodes, refinements included.
 */
export const lawful = (ast: SchemaAST.AST): boolean => lawfulIn(ast, new Set())

const lawfulIn = (ast: SchemaAST.AST, visiting: Set<SchemaAST.AST>): boolean => {
  switch (ast._tag) {
    case "Declaration":
    case "Transformation":
      return false
    case "Refinement":
      return lawfulIn(ast.from, visiting)
    case "TupleType":
      return ast.elements.every((e) => lawfulIn(e.type, visiting)) && ast.rest.every((r) => lawfulIn(r.type, visiting))
    case "TypeLiteral":
      return ast.propertySignatures.every((p) => typeof p.name === "string" && lawfulIn(p.type, visiting)) &&
        ast.indexSignatures.every((s) => keyIsString(s.parameter) && lawfulIn(s.type, visiting))
    case "Union":
      return ast.types.every((t) => lawfulIn(t, visiting))
    case "Suspend": {
      // A recursive Schema: its nodes are lawful unless one outside the cycle is not.
      if (visiting.has(ast)) return true
      visiting.add(ast)
      return lawfulIn(ast.f(), visiting)
    }
    default:
      // Literals, keywords, enums, template literals: read as they are.
      return true
  }
}

const keyIsString = (parameter: SchemaAST.Parameter): boolean =>
  parameter._tag === "Refinement" ? keyIsString(parameter.from) : parameter._tag !== "SymbolKeyword"
