/**
 * Typed, bounded access to the members of a JSON object, throwing
 * FormatErrors that name the file, the JSON path and the byte offset.
 *
 * @module
 */

import { FormatError } from "../errors.ts";
import { type JsonNode, type JsonObject, jsonPath, kindName } from "../safetensors/_json.ts";

/** Bounds for an integer field (inclusive). */
export interface IntBounds {
  /** Smallest accepted value. */
  readonly min: number;
  /** Largest accepted value. */
  readonly max: number;
}

/** Reads members of one JSON object. */
export class Fields {
  readonly file: string;
  readonly obj: JsonObject;
  readonly path: readonly (string | number)[];

  constructor(file: string, obj: JsonObject, path: readonly (string | number)[] = []) {
    this.file = file;
    this.obj = obj;
    this.path = path;
  }

  /** The JSON path of `key` (or of the object itself). */
  field(key?: string | number): string {
    return jsonPath("", key === undefined ? this.path : [...this.path, key]);
  }

  /** Throws a FormatError about `key` (at its value, or at the object when absent). */
  fail(key: string | number | undefined, detail: string, node?: JsonNode): never {
    throw new FormatError(this.file, this.field(key), (node ?? this.obj).offset, detail);
  }

  /** The member's node, or undefined when absent or JSON null. */
  get(key: string): JsonNode | undefined {
    const n = this.obj.entries.get(key);
    return n === undefined || n.kind === "null" ? undefined : n;
  }

  /** A member that must be present (and not null). */
  need(key: string): JsonNode {
    return this.get(key) ?? this.fail(key, "is required but missing (or null)");
  }

  /** An integer in `bounds`; `def` when absent (undefined means required). */
  int(key: string, bounds: IntBounds, def?: number): number {
    const n = def === undefined ? this.need(key) : this.get(key);
    if (n === undefined) return def as number;
    return this.intOf(key, n, bounds);
  }

  /** Validates an integer node. */
  intOf(key: string | number, n: JsonNode, bounds: IntBounds): number {
    if (n.kind !== "number") this.fail(key, `must be an integer, found ${kindName(n)}`, n);
    const v = n.value;
    if (!Number.isFinite(v)) this.fail(key, `${v} is not finite`, n);
    if (!Number.isSafeInteger(v)) this.fail(key, `${v} is not an integer`, n);
    if (v < bounds.min || v > bounds.max) {
      this.fail(key, `${v} is outside [${bounds.min}, ${bounds.max}]`, n);
    }
    return v;
  }

  /** A finite number with `lo < value < hi` (exclusive bounds); `def` when absent. */
  num(key: string, lo: number, hi: number, def?: number): number {
    const n = def === undefined ? this.need(key) : this.get(key);
    if (n === undefined) return def as number;
    if (n.kind !== "number") this.fail(key, `must be a number, found ${kindName(n)}`, n);
    const v = n.value;
    if (!Number.isFinite(v)) this.fail(key, `${v} is not finite`, n);
    if (!(v > lo && v < hi)) this.fail(key, `${v} is outside (${lo}, ${hi})`, n);
    return v;
  }

  /** A boolean; `def` when absent. */
  bool(key: string, def: boolean): boolean {
    const n = this.get(key);
    if (n === undefined) return def;
    if (n.kind !== "boolean") this.fail(key, `must be true or false, found ${kindName(n)}`, n);
    return n.value;
  }

  /** A string, or undefined when absent. */
  str(key: string): string | undefined {
    const n = this.get(key);
    if (n === undefined) return undefined;
    if (n.kind !== "string") this.fail(key, `must be a string, found ${kindName(n)}`, n);
    return n.value;
  }

  /** A nested object as Fields, or undefined when absent. */
  object(key: string): Fields | undefined {
    const n = this.get(key);
    if (n === undefined) return undefined;
    if (n.kind !== "object") this.fail(key, `must be an object, found ${kindName(n)}`, n);
    return new Fields(this.file, n, [...this.path, key]);
  }

  /** An array node, or undefined when absent. */
  array(key: string): readonly JsonNode[] | undefined {
    const n = this.get(key);
    if (n === undefined) return undefined;
    if (n.kind !== "array") this.fail(key, `must be an array, found ${kindName(n)}`, n);
    return n.items;
  }
}

/**
 * Throws a FormatError at the first number inside `node` (at any depth) that
 * is not finite; returns `node` otherwise.
 */
export function requireFinite(
  file: string,
  path: readonly (string | number)[],
  node: JsonNode,
): JsonNode {
  if (node.kind === "number" && !Number.isFinite(node.value)) {
    throw new FormatError(file, jsonPath("", path), node.offset, `${node.value} is not finite`);
  }
  if (node.kind === "array") node.items.forEach((n, i) => requireFinite(file, [...path, i], n));
  if (node.kind === "object") {
    for (const [k, n] of node.entries) requireFinite(file, [...path, k], n);
  }
  return node;
}
