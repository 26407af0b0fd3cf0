// The Sampler constructor's argument checks: the limits, the accepted option keys (keep
// OPTION_KEYS in step with SamplerOptions in sampler_options.ts) and the number check, and how a
// wrong value is named in the errors. Internal to sampling/.

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
