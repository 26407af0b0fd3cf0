// The Sampler constructor's argument checks: the limits, the accepted option keys (keep
// OPTION_KEYS in step with SamplerOptions in sampler_options.ts), the number check, the logitBias
// reader, and how a wrong value is named in the errors. Internal to sampling/.

/** Largest vocabulary accepted (2^24 tokens; real ones are under 2^18). */
export const MAX_VOCAB = 1 << 24;
/** Longest penalty window accepted. */
export const MAX_PENALTY_LAST_N = 1 << 20;

export const OPTION_KEYS: ReadonlySet<string> = new Set([
  "temperature",
  "topK",
  "topP",
  "minP",
  "repetitionPenalty",
  "penaltyLastN",
  "presencePenalty",
  "frequencyPenalty",
  "logitBias",
  "seed",
]);

export function describe(value: unknown): string {
  if (value === null) return "null";
  if (typeof value === "object") return value.constructor?.name ?? "object";
  return `${typeof value} ${String(value)}`;
}

export function num(name: string, value: unknown, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== "number") {
    throw new TypeError(`Sampler: ${name} must be a number, got ${describe(value)}`);
  }
  if (!Number.isFinite(value)) throw new RangeError(`Sampler: ${name} ${value} is not finite`);
  return value;
}

/**
 * `logitBias` as token id -> bias: a Map or a record of decimal token ids, each id an integer in
 * [0, vocabSize), each bias a number that is finite or `-Infinity`.
 */
export function readBias(raw: unknown, vocabSize: number): Map<number, number> {
  const out = new Map<number, number>();
  if (raw === undefined) return out;
  let entries: Iterable<[unknown, unknown]>;
  if (raw instanceof Map) {
    entries = raw.entries();
  } else if (typeof raw === "object" && raw !== null && !Array.isArray(raw)) {
    entries = Object.entries(raw).map(([k, v]): [unknown, unknown] => {
      if (!/^(0|[1-9][0-9]*)$/.test(k)) {
        throw new RangeError(`Sampler: logitBias key ${JSON.stringify(k)} is not a token id`);
      }
      return [Number(k), v];
    });
  } else {
    throw new TypeError(`Sampler: logitBias must be a Map or a record, got ${describe(raw)}`);
  }
  for (const [id, bias] of entries) {
    if (typeof id !== "number" || !Number.isInteger(id) || id < 0 || id >= vocabSize) {
      throw new RangeError(
        `Sampler: logitBias token id ${String(id)} is not an integer in [0, ${vocabSize})`,
      );
    }
    if (typeof bias !== "number") {
      throw new TypeError(`Sampler: logitBias[${id}] must be a number, got ${describe(bias)}`);
    }
    if (Number.isNaN(bias) || bias === Infinity) {
      throw new RangeError(`Sampler: logitBias[${id}] ${bias} is not finite or -Infinity`);
    }
    out.set(id, bias);
  }
  return out;
}
