//! Plans, the operations that are not matmuls: what each thread does with
//! its rows (RowCtx: norms, RoPE, the KV cache, attention, activations,
//! quantization, embeddings); for one row, its slice of the elements is in
//! plan_slices.zig (SliceCtx). plan_exec.zig's executor hands them to the
//! worker pool.

const std = @import("std");
const abi = @import("abi.zig");
const plan = @import("plan.zig");
const packing = @import("packing.zig");
const blocks = @import("blocks.zig");
const act_q8_k = @import("act_q8_k.zig");
const check = @import("plan_check.zig");

const assert = std.debug.assert;
const qk = abi.qk;
const Exec = plan.Exec;
const Op = plan.Op;
const Run = plan.Run;
const isPacked = plan.isPacked;
const attention_max_group = plan.attention_max_group;
const max_experts = plan.max_experts;
const quantizeRow = plan.quantizeRow;
const expf32 = plan.expf32;
const stripeOffsetOf = check.stripeOffsetOf;
const tileBytesOf = check.tileBytesOf;
const is_wasm = @import("builtin").cpu.arch == .wasm32;

/// A flag a job sets through its context's const pointer. In the wasm32
/// build (single-threaded) atomics become plain loads and stores, which the
/// optimizer may then drop as writes through a const pointer; volatile ones
/// it keeps.
pub const Flag = if (is_wasm) struct {
    raw: bool,
    /// A flag holding v.
    pub fn init(v: bool) @This() {
        return .{ .raw = v };
    }
    /// Sets the flag (a volatile store; the order is moot with one thread).
    pub fn store(self: *@This(), v: bool, comptime _: std.builtin.AtomicOrder) void {
        const p: *volatile bool = &self.raw;
        p.* = v;
    }
    /// Reads the flag (a volatile load).
    pub fn load(self: *const @This(), comptime _: std.builtin.AtomicOrder) bool {
        const p: *const volatile bool = &self.raw;
        return p.*;
    }
} else std.atomic.Value(bool);

/// Parts the query heads of each (row, KV head) attention item are cut
/// into, so that the busiest thread's share is least: the p that minimizes
/// ceil(items p / threads) pieces times the largest piece's cost, a piece of
/// h heads costing h + ceil(h / tile) (its heads, plus the K and V values
/// converted once per register tile of `tile` heads, attention.zig), the
/// smaller p on a tie, p at most the threads. A decode step of a model with one KV head (Gemma 3's)
/// would otherwise run on one thread; SmolLM2's 3 KV heads of 3 query heads
/// on 2 threads went 2 items to 1, and on `avx2` (tiles of 2 heads) are cut
/// into 2 + 1 heads: attention 14% shorter (decode, Zen 4, 3 runs each).
/// Each head's arithmetic does not depend on the heads beside it in a call,
/// so the cut changes no result.
pub fn attentionParts(group: usize, items: usize, threads: usize, tile: usize) usize {
    assert(group >= 1 and items >= 1 and threads >= 1 and tile >= 1);
    var best: usize = 1;
    var best_cost: usize = std.math.maxInt(usize);
    // More parts than threads would only queue: p stays at most both.
    for (1..@min(group, threads) + 1) |p| {
        const per_part = std.math.divCeil(usize, group, p) catch unreachable;
        // A p whose last parts would be empty is a smaller p with idle items.
        if ((std.math.divCeil(usize, group, per_part) catch unreachable) != p) continue;
        const rounds = std.math.divCeil(usize, std.math.mul(usize, items, p) catch return 1, threads) catch unreachable;
        const piece = per_part + (std.math.divCeil(usize, per_part, tile) catch unreachable);
        const cost = std.math.mul(usize, rounds, piece) catch return 1;
        if (cost < best_cost) {
            best = p;
            best_cost = cost;
        }
    }
    return best;
}

test "attentionParts: the cut that evens the threads' shares" {
    // A prefill: many items, one part each.
    try std.testing.expectEqual(@as(usize, 1), attentionParts(4, 512, 2, 4));
    try std.testing.expectEqual(@as(usize, 1), attentionParts(3, 3 * 512, 2, 2));
    // SmolLM2 decode: 3 KV heads of 3, 2 threads: whole groups with tiles of
    // 4 heads (2 x 4 against 3 x 3), 2 + 1 heads with tiles of 2.
    try std.testing.expectEqual(@as(usize, 1), attentionParts(3, 3, 2, 4));
    try std.testing.expectEqual(@as(usize, 2), attentionParts(3, 3, 2, 2));
    // Four sequences decoding together: enough items.
    try std.testing.expectEqual(@as(usize, 1), attentionParts(3, 12, 2, 2));
    // Gemma 3: one KV head of 4; halves on 2 threads, single heads on 16.
    try std.testing.expectEqual(@as(usize, 2), attentionParts(4, 1, 2, 4));
    try std.testing.expectEqual(@as(usize, 2), attentionParts(4, 1, 2, 2));
    try std.testing.expectEqual(@as(usize, 4), attentionParts(4, 1, 16, 4));
    // 2 items of 6 on 5 threads: halves (4 threads busy) beat thirds.
    try std.testing.expectEqual(@as(usize, 2), attentionParts(6, 2, 5, 4));
    // Qwen2.5-Coder-1.5B: 2 KV heads of 6 on 2 threads stay whole.
    try std.testing.expectEqual(@as(usize, 1), attentionParts(6, 2, 2, 4));
    try std.testing.expectEqual(@as(usize, 1), attentionParts(6, 2, 2, 2));
    try std.testing.expectEqual(@as(usize, 1), attentionParts(1, 1, 8, 4));
    try std.testing.expectEqual(@as(usize, 1), attentionParts(4, 1, 1, 4));
    // Never an empty part, whatever the inputs.
    for (1..2 * attention_max_group + 1) |g| {
        for (1..40) |items| {
            for (1..20) |threads| {
                for (1..5) |tile| {
                    const p = attentionParts(g, items, threads, tile);
                    try std.testing.expect(p >= 1 and p <= g);
                    const per = std.math.divCeil(usize, g, p) catch unreachable;
                    try std.testing.expect((p - 1) * per < g);
                }
            }
        }
    }
}

/// How many operations from the start of `ops` (whole operations, the first
/// a row operation) run as one row job: the first and each following row
/// operation that reads and writes only its own row of its buffers, with
/// the same last-row flag, while each writes a buffer of one row per batch
/// row (stride not 0) or the KV cache at its own row's index. Each row then
/// runs them in order: the same values as one job each, the threads waiting
/// for each other once instead of once per operation.
pub fn fusedRows(ops: []const u32) usize {
    assert(ops.len >= plan.op_words and ops.len % plan.op_words == 0);
    var n: usize = 0;
    while ((n + 1) * plan.op_words <= ops.len and n < max_fused) : (n += 1) {
        const w = ops[n * plan.op_words ..][0..plan.op_words];
        if (n > 0 and w[1] != ops[1]) break;
        if (!ownRows(w)) break;
    }
    return @max(n, 1);
}

/// Most operations one row job takes (Qwen2.5's three biases, RoPE and
/// two KV stores make 6 in a row).
pub const max_fused: usize = 8;

/// Whether `w` is a row operation whose output is its own row of a per-row
/// buffer (the buffer's stride is not 0) or of the KV cache.
fn ownRows(w: []const u32) bool {
    const a = w[2..];
    const out_stride: u32 = switch (@as(Op, @enumFromInt(w[0]))) {
        .embed => a[2],
        .rms_norm, .quantize, .quantize_k => a[4],
        .add, .add_vec, .head_norm, .rope, .softcap, .lincomb, .gate_scale => a[1],
        .gated => a[4],
        .kv_store => return true,
        else => return false,
    };
    return out_stride != 0;
}

test "fusedRows: consecutive row operations writing their own rows, one last-row flag" {
    const W = plan.op_words;
    var ops = [_]u32{0} ** (6 * W);
    const set = struct {
        fn op(o: []u32, i: usize, code: plan.Op, flags: u32, out_stride: u32) void {
            const w = o[i * W ..][0..W];
            w[0] = @intFromEnum(code);
            w[1] = flags;
            switch (code) {
                .rms_norm, .quantize => w[2 + 4] = out_stride,
                .rope, .add => w[2 + 1] = out_stride,
                else => {},
            }
        }
    }.op;
    set(&ops, 0, .rms_norm, 0, 2304);
    set(&ops, 1, .quantize, 0, 640);
    set(&ops, 2, .matmul, 0, 0);
    set(&ops, 3, .rope, 0, 3840);
    set(&ops, 4, .kv_store, 0, 0);
    set(&ops, 5, .add, 1, 2304);
    try std.testing.expectEqual(@as(usize, 2), fusedRows(&ops));
    try std.testing.expectEqual(@as(usize, 1), fusedRows(ops[W..]));
    try std.testing.expectEqual(@as(usize, 2), fusedRows(ops[3 * W ..]));
    try std.testing.expectEqual(@as(usize, 1), fusedRows(ops[5 * W ..]));
    // A shared (stride 0) output ends the run; a lone operation is a run of one.
    set(&ops, 1, .quantize, 0, 0);
    try std.testing.expectEqual(@as(usize, 1), fusedRows(&ops));
    try std.testing.expectEqual(@as(usize, 1), fusedRows(ops[W..]));
}

/// Per-row (and per-head) operations.
pub const RowCtx = struct {
    ex: *const Exec,
    w: []const u32,
    row0: usize,
    failed: Flag = .init(false),
    /// Parts an attention item's query heads are cut into (`attentionParts`).
    parts: usize = 1,
    /// Consecutive rows an attention item takes together (`attention_rows`);
    /// 1 with `parts` > 1. `n_rows`: the operation's rows from row0 on.
    stack: usize = 1,
    n_rows: usize = 0,
    /// Row operations `rows` runs, one after the other for each row (`w`
    /// holds their words): consecutive row operations of a plan run in one
    /// job, so that the threads wait for each other once for all of them
    /// (`fusedRows`).
    n_ops: usize = 1,
    /// For each of those operations that is a rope with a table, its rows'
    /// cos and sin (`Exec.ropeAngles`, n_rot floats a row); null: the row
    /// takes its own.
    rope_cs: [max_fused]?[]const f32 = @splat(null),

    /// The pool's job: rows [row0 + begin, row0 + end) of the operations,
    /// each row through all of them in order.
    pub fn rows(raw: *const anyopaque, begin: usize, end: usize) void {
        const self: *const RowCtx = @ptrCast(@alignCast(raw));
        assert(self.n_ops >= 1 and self.w.len == self.n_ops * plan.op_words);
        for (begin..end) |i| {
            for (0..self.n_ops) |j| self.row(self.w[j * plan.op_words ..][0..plan.op_words], self.rope_cs[j], self.row0 + i);
        }
    }

    fn row(self: *const RowCtx, ow: []const u32, rope_cs: ?[]const f32, t: usize) void {
        const ex = self.ex;
        const k = ex.env.t;
        const a = ow[2..];
        const pos: u32 = ex.rows.position(t);
        // The row's index in the KV cache: its sequence's base plus its position.
        const kv_at: usize = @as(usize, ex.rows.base(t)) + pos;
        switch (@as(Op, @enumFromInt(ow[0]))) {
            .embed => {
                const r = &ex.p.runs[a[0]];
                const out = ex.f32s(a[1], a[2], t, r.layout.cols);
                embedRow(r, ex.tokens[t], out);
                const scale: f32 = @bitCast(a[3]);
                if (scale != 1) {
                    for (out) |*v| v.* *= scale;
                }
            },
            .rms_norm => {
                const n = a[5];
                k.rms_norm(ex.f32s(a[0], a[1], t, n).ptr, ex.f32s(a[2], 0, 0, n).ptr, n, @bitCast(a[6]), ex.f32s(a[3], a[4], t, n).ptr);
            },
            .quantize => {
                if (!quantizeRow(k, ex.f32s(a[0], a[1], t, a[2]), ex.bytesAt(a[3], a[4], t))) {
                    @constCast(self).failed.store(true, .release);
                    return;
                }
            },
            .quantize_k => {
                if (!act_q8_k.quantizeRow(ex.f32s(a[0], a[1], t, a[2]), ex.bytesAt(a[3], a[4], t))) {
                    @constCast(self).failed.store(true, .release);
                    return;
                }
            },
            .add => {
                const n = a[4];
                const x = ex.f32s(a[0], a[1], t, n);
                const y = ex.f32s(a[2], a[3], t, n);
                for (x, y) |*xv, yv| xv.* += yv;
            },
            .add_vec => {
                const n = a[3];
                const x = ex.f32s(a[0], a[1], t, n);
                const y = ex.f32s(a[2], 0, 0, n);
                for (x, y) |*xv, yv| xv.* += yv;
            },
            .head_norm => {
                const heads = a[2];
                const hd = a[3];
                const v = ex.f32s(a[0], a[1], t, heads * hd);
                const w = ex.f32s(a[4], 0, 0, hd);
                // In place: the kernel computes the scale before writing.
                for (0..heads) |h| k.rms_norm(v[h * hd ..].ptr, w.ptr, hd, @bitCast(a[5]), v[h * hd ..].ptr);
            },
            .rope => {
                const heads = a[2];
                const hd = a[3];
                const x = ex.f32s(a[0], a[1], t, heads * hd);
                if (rope_cs) |cs| {
                    k.rope_table(x.ptr, heads, hd, a[4], cs[t * a[4] ..][0..a[4]].ptr, a[6]);
                } else {
                    k.rope(x.ptr, heads, hd, a[4], pos, ex.f32s(a[5], 0, 0, a[4] / 2).ptr, a[6]);
                }
            },
            .kv_store => {
                const kv_dim = a[3];
                const hd = a[5];
                const ctx: usize = ex.p.context;
                const src = ex.f32s(a[0], a[1], t, kv_dim);
                for (0..kv_dim / hd) |h| {
                    const at = (h * ctx + kv_at) * hd;
                    const head = src[h * hd ..][0..hd];
                    switch (a[4]) {
                        1 => {
                            const dst: [*]f32 = @ptrCast(@alignCast(ex.p.ws + a[2]));
                            @memcpy(dst[at..][0..hd], head);
                        },
                        2 => {
                            const dst: [*]f16 = @ptrCast(@alignCast(ex.p.ws + a[2]));
                            k.f32_to_f16(head.ptr, dst + at, hd);
                        },
                        else => {
                            // Whole blocks: head_dim % 32 == 0 (checkOp).
                            const dst: [*]abi.BlockQ8_0 = @ptrCast(ex.p.ws + a[2]);
                            if (!k.quantize_q8_0(head.ptr, hd / abi.qk, dst + at / abi.qk)) {
                                @constCast(self).failed.store(true, .release);
                                return;
                            }
                        },
                    }
                }
            },
            .gated => {
                const n = a[5];
                const gu = ex.f32s(a[1], a[2], t, 2 * n);
                const out = ex.f32s(a[3], a[4], t, n);
                if (a[0] == 0) k.silu_mul(gu.ptr, gu[n..].ptr, out.ptr, n) else k.gelu_mul(gu.ptr, gu[n..].ptr, out.ptr, n);
            },
            .softcap => {
                const x = ex.f32s(a[0], a[1], t, a[2]);
                const cap: f32 = @bitCast(a[3]);
                for (x) |*v| v.* = cap * std.math.tanh(v.* / cap);
            },
            .route => {
                const n = a[3];
                const n_exp = a[4];
                const top_k = a[5];
                const x = ex.f32s(a[0], a[1], t, n);
                const r = ex.f32s(a[2], 0, 0, n_exp * n);
                var p: [max_experts]f32 = undefined;
                var taken = [_]bool{false} ** max_experts;
                var top: f32 = -std.math.inf(f32);
                for (0..n_exp) |e| {
                    var acc: f32 = 0;
                    for (r[e * n ..][0..n], x) |wv, xv| acc += wv * xv;
                    p[e] = acc;
                    top = @max(top, acc);
                }
                if (!std.math.isFinite(top)) {
                    @constCast(self).failed.store(true, .release);
                    return;
                }
                var sum: f32 = 0;
                for (p[0..n_exp]) |*v| {
                    v.* = expf32(v.* - top);
                    sum += v.*;
                }
                for (p[0..n_exp]) |*v| v.* /= sum;
                const sel = ex.bytesAt(a[7], a[8], t);
                var chosen: f32 = 0;
                for (0..top_k) |j| {
                    var best: usize = n_exp;
                    for (0..n_exp) |e| {
                        if (!taken[e] and (best == n_exp or p[e] > p[best])) best = e;
                    }
                    taken[best] = true;
                    chosen += p[best];
                    std.mem.writeInt(u32, sel[j * 4 ..][0..4], @intCast(best), .little);
                    std.mem.writeInt(u32, sel[(top_k + j) * 4 ..][0..4], @bitCast(p[best]), .little);
                }
                if (a[6] & 1 != 0) {
                    for (0..top_k) |j| {
                        const at = sel[(top_k + j) * 4 ..][0..4];
                        const w: f32 = @bitCast(std.mem.readInt(u32, at, .little));
                        std.mem.writeInt(u32, at, @bitCast(w / chosen), .little);
                    }
                }
            },
            .gate_scale => {
                const y = ex.f32s(a[0], a[1], t, a[2]);
                const v = ex.f32s(a[3], 0, 0, a[6]);
                const x = ex.f32s(a[4], a[5], t, a[6]);
                var d: f32 = 0;
                for (v, x) |vv, xv| d += vv * xv;
                const g = 1 / (1 + expf32(-d));
                for (y) |*yv| yv.* *= g;
            },
            .lincomb => {
                const n = a[6];
                const out = ex.f32s(a[0], a[1], t, n);
                const b = ex.f32s(a[4], a[5], t, n);
                const alpha: f32 = @bitCast(a[7]);
                const beta: f32 = @bitCast(a[8]);
                if (alpha == 0 and beta == 0) {
                    @memset(out, 0);
                } else if (alpha == 0) {
                    for (out, b) |*o, bv| o.* = beta * bv;
                } else {
                    const av = ex.f32s(a[2], a[3], t, n);
                    for (out, av, b) |*o, x, bv| o.* = alpha * x + beta * bv;
                }
            },
            .matmul, .attention, .moe, .timestamp, .fetch, .moe_staged => unreachable,
            _ => unreachable,
        }
    }

    /// Attention items are (row, KV head, part) triples: a part of the query
    /// heads sharing the KV head (all of them unless `parts` > 1),
    /// attending over the positions up to the row's own. With `stack` > 1
    /// (set only for consecutive positions of one sequence, `Rows.consecutive`)
    /// they are (chunk of `stack` rows, KV head) pairs instead, whose rows
    /// run together where they share their window's start, one by one
    /// otherwise; the results are the same.
    pub fn attention(raw: *const anyopaque, begin: usize, end: usize) void {
        const self: *const RowCtx = @ptrCast(@alignCast(raw));
        const a = self.w[2..];
        const n_kv = a[6];
        const group = a[5] / n_kv;
        const parts = self.parts;
        assert(parts >= 1 and parts <= group);
        const per_part = std.math.divCeil(usize, group, parts) catch unreachable;
        for (begin..end) |item| {
            if (self.stack > 1) {
                assert(parts == 1);
                const t0 = self.row0 + (item / n_kv) * self.stack;
                const t_end = @min(self.row0 + self.n_rows, t0 + self.stack);
                assert(t0 < t_end);
                self.attendRows(t0, t_end, item % n_kv);
                continue;
            }
            const pair = item / parts;
            const part = item % parts;
            // This part's query heads [g_begin, g_end) of the group.
            const g_begin = @min(group, part * per_part);
            self.attendRow(self.row0 + pair / n_kv, pair % n_kv, g_begin, @min(group, g_begin + per_part));
        }
    }

    /// The first cache row that row t attends to: its sequence's base, plus how
    /// far a sliding window (a[8], 0 for none) has moved.
    fn firstPosition(self: *const RowCtx, t: usize) usize {
        const window = self.w[2 + 8];
        const n_pos: usize = @as(usize, self.ex.rows.position(t)) + 1;
        return @as(usize, self.ex.rows.base(t)) + if (window > 0 and n_pos > window) n_pos - window else 0;
    }

    /// Query heads [g_begin, g_end) of KV head kvh, row t.
    fn attendRow(self: *const RowCtx, t: usize, kvh: usize, g_begin: usize, g_end: usize) void {
        const ex = self.ex;
        const a = self.w[2..];
        const heads = a[5];
        const hd = a[7];
        const group = heads / a[6];
        const n_pos: usize = @as(usize, ex.rows.position(t)) + 1;
        const kv_base: usize = ex.rows.base(t);
        const first = self.firstPosition(t);
        const q = ex.f32s(a[0], a[1], t, heads * hd);
        const out = ex.f32s(a[11], a[12], t, heads * hd);
        var g0: usize = g_begin;
        while (g0 < g_end) : (g0 += attention_max_group) {
            const n: usize = @min(attention_max_group, g_end - g0);
            const h0 = kvh * group + g0;
            ex.env.t.attention_group(a[4], q[h0 * hd ..].ptr, n, hd, ex.p.ws + a[2], ex.p.ws + a[3], hd, kvh * ex.p.context * hd, first, kv_base + n_pos, @bitCast(a[9]), @bitCast(a[10]), out[h0 * hd ..].ptr);
        }
    }

    /// Every query head of KV head kvh for rows [t0, t_end), consecutive
    /// positions of one sequence (the plan stacks no others): in one call
    /// when they share their window's start, else row by row.
    fn attendRows(self: *const RowCtx, t0: usize, t_end: usize, kvh: usize) void {
        const ex = self.ex;
        const a = self.w[2..];
        const heads = a[5];
        const hd = a[7];
        const group = heads / a[6];
        const first = self.firstPosition(t0);
        // The last row's window moved furthest: the rows share a start when it did not move.
        if (t_end - t0 == 1 or self.firstPosition(t_end - 1) != first) {
            for (t0..t_end) |t| self.attendRow(t, kvh, 0, group);
            return;
        }
        assert(a[1] % 4 == 0 and a[12] % 4 == 0);
        const n_pos0: usize = @as(usize, ex.rows.base(t0)) + ex.rows.position(t0) + 1;
        const q = ex.f32s(a[0], a[1], t0, heads * hd);
        const out = ex.f32s(a[11], a[12], t0, heads * hd);
        const h0 = kvh * group;
        ex.env.t.attention_rows(a[4], q[h0 * hd ..].ptr, a[1] / 4, t_end - t0, group, hd, ex.p.ws + a[2], ex.p.ws + a[3], hd, kvh * ex.p.context * hd, first, n_pos0, @bitCast(a[9]), @bitCast(a[10]), out[h0 * hd ..].ptr, a[12] / 4);
    }
};

/// Row `token` of member 0 of a run, dequantized.
pub fn embedRow(r: *const Run, token: u32, out: []f32) void {
    const l = &r.layout;
    if (isPacked(r.kind)) return packing.unpackRow(l, r.base[0..r.len], 0, token, out);
    assert(r.kind == .tiles_q4_0 or r.kind == .tiles_q8_0 or r.kind == .tiles_f32 or r.kind == .tiles);
    const t = r.types[0];
    const s = token / packing.tile_rows;
    const tr: usize = @min(packing.tile_rows, l.rows[0] - s * packing.tile_rows);
    const local = token - s * packing.tile_rows;
    var pos = stripeOffsetOf(r, 0, s);
    var c0: usize = 0;
    while (c0 < l.cols) : (c0 += packing.tile_cols) {
        const tc: usize = @min(packing.tile_cols, l.cols - c0);
        const body = r.base + pos + packing.tile_header_bytes;
        switch (t) {
            .q4_0, .q8_0 => {
                const gb: usize = if (t == .q8_0) 32 else 16;
                const ng = packing.groupsOf(tc);
                const data = body + tr * ng * 2;
                for (0..ng) |g| {
                    const sp = body + (local * ng + g) * 2;
                    const d = abi.f16ToF32(@as(u16, sp[0]) | (@as(u16, sp[1]) << 8));
                    const wq = data + (local * ng + g) * gb;
                    for (0..qk) |j| {
                        const col = c0 + g * qk + j;
                        if (col >= l.cols) break;
                        const v: i32 = if (t == .q8_0)
                            @as(i8, @bitCast(wq[j]))
                        else
                            @as(i32, if (j < 16) wq[j] & 15 else wq[j - 16] >> 4) - 8;
                        out[col] = @as(f32, @floatFromInt(v)) * d;
                    }
                }
            },
            // ggml's dequantization of the row's blocks (or values) in this tile.
            else => blocks.dequantizeRow(t, body + local * blocks.rowBytes(t, tc), tc, out[c0..][0..tc]),
        }
        pos += tileBytesOf(t, tr, tc);
    }
}
