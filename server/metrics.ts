/**
 * The server's Prometheus metrics (`GET /metrics`, text exposition format
 * 0.0.4): counters of requests, tokens and prompt-cache reuse, histograms
 * of time to first token, inter-token latency and request duration, and
 * gauges of what the server holds now (slots, queue, KV cache, state). The
 * label values are bounded: an endpoint outside the known routes counts as
 * `other`, so a client cannot grow the series.
 *
 * @module
 */

/** The routes counted by name; any other path is `other`. */
const ENDPOINTS: ReadonlySet<string> = new Set([
  "/",
  "/page.js",
  "/page.css",
  "/health",
  "/health/live",
  "/metrics",
  "/slots",
  "/v1/models",
  "/v1/chat/completions",
  "/v1/completions",
  "/v1/embeddings",
  "/tokenize",
  "/detokenize",
  "/api/chat",
  "/api/generate",
  "/api/tags",
  "/api/show",
  "/api/ps",
  "/api/version",
  "/api/embed",
  "/api/embeddings",
]);

/** Bucket bounds (seconds) of the latency histograms: 1 ms to 60 s. */
const LATENCY_BUCKETS = [
  0.001,
  0.0025,
  0.005,
  0.01,
  0.025,
  0.05,
  0.1,
  0.25,
  0.5,
  1,
  2.5,
  5,
  10,
  30,
  60,
];

/** A histogram with fixed bucket bounds: per bucket the count of values <= its bound. */
class Histogram {
  readonly bounds: readonly number[];
  readonly counts: number[];
  sum = 0;
  count = 0;
  constructor(bounds: readonly number[]) {
    this.bounds = bounds;
    this.counts = bounds.map(() => 0);
  }
  observe(v: number): void {
    if (!Number.isFinite(v) || v < 0) return;
    for (let i = 0; i < this.bounds.length; i++) if (v <= this.bounds[i]) this.counts[i]++;
    this.sum += v;
    this.count++;
  }
}

/** What the server holds when /metrics is read (gauges). */
export interface MetricsGauges {
  /** Slots generating now, and all slots. */
  slotsBusy: number;
  slotsTotal: number;
  /** Requests waiting for a slot. */
  queued: number;
  /** Positions and bytes every slot's KV cache holds, and the positions all can hold. */
  kvTokens: number;
  kvBytes: number;
  kvCapacityTokens: number;
  /** 1 when the model is loaded and the server is not draining. */
  ready: number;
  /** 1 while draining (after SIGTERM). */
  draining: number;
}

/**
 * The counters and histograms of one server, and their text exposition.
 *
 * @example
 * ```ts
 * import { Metrics } from "./metrics.ts";
 * const m = new Metrics();
 * m.request("/v1/completions", 200);
 * m.generation({ promptTokens: 12, cachedTokens: 4, generatedTokens: 8 });
 * console.log(m.render({
 *   slotsBusy: 0, slotsTotal: 1, queued: 0, kvTokens: 20, kvBytes: 0,
 *   kvCapacityTokens: 2048, ready: 1, draining: 0,
 * }).includes("cflow_requests_total"));
 * ```
 */
export class Metrics {
  /** Seconds the model took to load (set once it has). */
  modelLoadSeconds = 0;
  readonly #requests = new Map<string, number>();
  #promptTokens = 0;
  #cachedTokens = 0;
  #generatedTokens = 0;
  #cacheHits = 0;
  #generations = 0;
  readonly #ttft = new Histogram(LATENCY_BUCKETS);
  readonly #itl = new Histogram(LATENCY_BUCKETS);
  readonly #duration = new Histogram(LATENCY_BUCKETS);

  /** Counts a request answered with `status` on `path` and observes its duration. */
  request(path: string, status: number, seconds?: number): void {
    const endpoint = ENDPOINTS.has(path) ? path : "other";
    const code = Number.isInteger(status) && status >= 100 && status < 600 ? status : 0;
    const key = `${endpoint} ${code}`;
    this.#requests.set(key, (this.#requests.get(key) ?? 0) + 1);
    if (seconds !== undefined) this.#duration.observe(seconds);
  }

  /** Counts a finished generation's tokens; one that reused a cached prefix is a cache hit. */
  generation(g: { promptTokens: number; cachedTokens: number; generatedTokens: number }): void {
    this.#generations++;
    this.#promptTokens += g.promptTokens;
    this.#cachedTokens += g.cachedTokens;
    this.#generatedTokens += g.generatedTokens;
    if (g.cachedTokens > 0) this.#cacheHits++;
  }

  /** Observes the time from a request's start to its first generated token. */
  firstToken(seconds: number): void {
    this.#ttft.observe(seconds);
  }

  /** Observes the time between two generated tokens of one request. */
  interToken(seconds: number): void {
    this.#itl.observe(seconds);
  }

  /** The metrics in Prometheus' text format, with `g` as the gauges. */
  render(g: MetricsGauges): string {
    const out: string[] = [];
    const head = (name: string, type: string, help: string) =>
      out.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
    const one = (name: string, type: string, help: string, value: number) => {
      head(name, type, help);
      out.push(`${name} ${num(value)}`);
    };
    head("cflow_requests_total", "counter", "HTTP requests answered, by endpoint and status.");
    for (const [key, n] of [...this.#requests].sort(([a], [b]) => a < b ? -1 : a > b ? 1 : 0)) {
      const [endpoint, status] = key.split(" ");
      out.push(`cflow_requests_total{endpoint="${endpoint}",status="${status}"} ${n}`);
    }
    one("cflow_generations_total", "counter", "Generations finished.", this.#generations);
    one(
      "cflow_prompt_tokens_total",
      "counter",
      "Prompt tokens of finished generations.",
      this.#promptTokens,
    );
    one(
      "cflow_prompt_cache_tokens_total",
      "counter",
      "Prompt tokens taken from a KV cache instead of computed.",
      this.#cachedTokens,
    );
    one(
      "cflow_prompt_cache_hits_total",
      "counter",
      "Generations that reused a cached prompt prefix.",
      this.#cacheHits,
    );
    one("cflow_generated_tokens_total", "counter", "Tokens generated.", this.#generatedTokens);
    const histogram = (name: string, help: string, h: Histogram) => {
      head(name, "histogram", help);
      h.bounds.forEach((b, i) => out.push(`${name}_bucket{le="${num(b)}"} ${h.counts[i]}`));
      out.push(
        `${name}_bucket{le="+Inf"} ${h.count}`,
        `${name}_sum ${num(h.sum)}`,
        `${name}_count ${h.count}`,
      );
    };
    histogram(
      "cflow_time_to_first_token_seconds",
      "Time from a request's arrival to its first generated token.",
      this.#ttft,
    );
    histogram(
      "cflow_inter_token_latency_seconds",
      "Time between two tokens of one generation.",
      this.#itl,
    );
    histogram(
      "cflow_request_duration_seconds",
      "Time to answer a request in full.",
      this.#duration,
    );
    one("cflow_slots_busy", "gauge", "Slots generating now.", g.slotsBusy);
    one("cflow_slots", "gauge", "Slots (generations at a time).", g.slotsTotal);
    one("cflow_queue_depth", "gauge", "Requests waiting for a slot.", g.queued);
    one("cflow_kv_cache_tokens", "gauge", "Positions the slots' KV caches hold.", g.kvTokens);
    one("cflow_kv_cache_bytes", "gauge", "Bytes of KV cache those positions take.", g.kvBytes);
    one(
      "cflow_kv_cache_capacity_tokens",
      "gauge",
      "Positions all slots' KV caches can hold.",
      g.kvCapacityTokens,
    );
    one(
      "cflow_model_load_seconds",
      "gauge",
      "Seconds the model took to load.",
      this.modelLoadSeconds,
    );
    one(
      "cflow_ready",
      "gauge",
      "1 when the model is loaded and the server takes requests.",
      g.ready,
    );
    one("cflow_draining", "gauge", "1 while the server drains before it exits.", g.draining);
    return out.join("\n") + "\n";
  }
}

/** A sample value as Prometheus writes it. */
function num(v: number): string {
  if (Number.isNaN(v)) return "NaN";
  if (v === Infinity) return "+Inf";
  if (v === -Infinity) return "-Inf";
  return String(v);
}
