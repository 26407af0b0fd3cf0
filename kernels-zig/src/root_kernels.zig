//! The C ABI's single-kernel exports (root.zig): quantization, block dots,
//! matvecs, norms, softmax, RoPE, the gated activations and the streaming
//! read; the tiled matrices read in place; attention over a KV cache. The
//! TypeScript reference path and the tests call them one at a time; a
//! forward pass runs as a plan instead. Each validates what it is given
//! with root.zig's checks before calling the active variant's kernel.

const std = @import("std");
const builtin = @import("builtin");
const abi = @import("abi.zig");
const root = @import("root.zig");
const Table = @import("table.zig").Table;
const memory = if (root.is_wasm) @import("memory_wasm.zig") else @import("memory.zig");

const is_wasm = root.is_wasm;
const Status = abi.Status;
const qk = abi.qk;
const CheckError = root.CheckError;
const table = root.table;
const ok = root.ok;
const statusOf = root.statusOf;
const typed = root.typed;
const typedMut = root.typedMut;
const mul = root.mul;
const blocksOf = root.blocksOf;
const need = root.need;
const runPooled = root.runPooled;

/// int32_t cf_quantize_q8_0(const float *x, size_t n, uint8_t *out, size_t out_len)
pub export fn cf_quantize_q8_0(x: ?*const anyopaque, n: usize, out: ?*anyopaque, out_len: usize) i32 {
    const t = table() orelse return Status.not_initialized.code();
    return quantizeQ8_0(t, x, n, out, out_len) catch |e| statusOf(e);
}

fn quantizeQ8_0(t: *const Table, x_raw: ?*const anyopaque, n: usize, out_raw: ?*anyopaque, out_len: usize) CheckError!i32 {
    const x = try typed(f32, x_raw);
    const out = try typedMut(abi.BlockQ8_0, out_raw);
    const nb = try blocksOf(n);
    try need(out_len, try mul(nb, abi.q8_0_block_bytes));
    if (!t.quantize_q8_0(x, nb, out)) return Status.nonfinite.code();
    return ok();
}

/// int32_t cf_block_dots_q4_0_q8_0(const uint8_t *w, size_t w_len,
///     const uint8_t *x, size_t x_len, size_t n_blocks, int32_t *out, size_t out_len)
pub export fn cf_block_dots_q4_0_q8_0(w: ?*const anyopaque, w_len: usize, x: ?*const anyopaque, x_len: usize, n_blocks: usize, out: ?*anyopaque, out_len: usize) i32 {
    const t = table() orelse return Status.not_initialized.code();
    return blockDots(t, .q4_0, w, w_len, x, x_len, n_blocks, out, out_len) catch |e| statusOf(e);
}

/// int32_t cf_block_dots_q8_0_q8_0(...) as cf_block_dots_q4_0_q8_0.
pub export fn cf_block_dots_q8_0_q8_0(w: ?*const anyopaque, w_len: usize, x: ?*const anyopaque, x_len: usize, n_blocks: usize, out: ?*anyopaque, out_len: usize) i32 {
    const t = table() orelse return Status.not_initialized.code();
    return blockDots(t, .q8_0, w, w_len, x, x_len, n_blocks, out, out_len) catch |e| statusOf(e);
}

const WeightType = enum { q4_0, q8_0 };

fn blockBytes(wt: WeightType) usize {
    return switch (wt) {
        .q4_0 => abi.q4_0_block_bytes,
        .q8_0 => abi.q8_0_block_bytes,
    };
}

fn blockDots(t: *const Table, comptime wt: WeightType, w_raw: ?*const anyopaque, w_len: usize, x_raw: ?*const anyopaque, x_len: usize, n_blocks: usize, out_raw: ?*anyopaque, out_len: usize) CheckError!i32 {
    if (n_blocks == 0) return error.InvalidArg;
    const out = try typedMut(i32, out_raw);
    try need(w_len, try mul(n_blocks, blockBytes(wt)));
    try need(x_len, try mul(n_blocks, abi.q8_0_block_bytes));
    try need(out_len, n_blocks);
    const x = try typed(abi.BlockQ8_0, x_raw);
    switch (wt) {
        .q4_0 => t.block_dots_q4_0(try typed(abi.BlockQ4_0, w_raw), x, n_blocks, out),
        .q8_0 => t.block_dots_q8_0(try typed(abi.BlockQ8_0, w_raw), x, n_blocks, out),
    }
    return ok();
}

/// int32_t cf_dot_q4_0_q8_0(const uint8_t *w, size_t w_len, const uint8_t *x,
///     size_t x_len, size_t n, float *out): out[0] = dot of n elements.
pub export fn cf_dot_q4_0_q8_0(w: ?*const anyopaque, w_len: usize, x: ?*const anyopaque, x_len: usize, n: usize, out: ?*anyopaque) i32 {
    const t = table() orelse return Status.not_initialized.code();
    return matvec(t, .q4_0, w, w_len, 1, n, x, x_len, out, 1) catch |e| statusOf(e);
}

/// int32_t cf_dot_q8_0_q8_0(...) as cf_dot_q4_0_q8_0.
pub export fn cf_dot_q8_0_q8_0(w: ?*const anyopaque, w_len: usize, x: ?*const anyopaque, x_len: usize, n: usize, out: ?*anyopaque) i32 {
    const t = table() orelse return Status.not_initialized.code();
    return matvec(t, .q8_0, w, w_len, 1, n, x, x_len, out, 1) catch |e| statusOf(e);
}

/// int32_t cf_matvec_q4_0(const uint8_t *w, size_t w_len, size_t rows, size_t cols,
///     const uint8_t *x, size_t x_len, float *y, size_t y_len): y = W x over the pool.
pub export fn cf_matvec_q4_0(w: ?*const anyopaque, w_len: usize, rows: usize, cols: usize, x: ?*const anyopaque, x_len: usize, y: ?*anyopaque, y_len: usize) i32 {
    const t = table() orelse return Status.not_initialized.code();
    return matvec(t, .q4_0, w, w_len, rows, cols, x, x_len, y, y_len) catch |e| statusOf(e);
}

/// int32_t cf_matvec_q8_0(...) as cf_matvec_q4_0.
pub export fn cf_matvec_q8_0(w: ?*const anyopaque, w_len: usize, rows: usize, cols: usize, x: ?*const anyopaque, x_len: usize, y: ?*anyopaque, y_len: usize) i32 {
    const t = table() orelse return Status.not_initialized.code();
    return matvec(t, .q8_0, w, w_len, rows, cols, x, x_len, y, y_len) catch |e| statusOf(e);
}

fn MatvecCtx(comptime wt: WeightType) type {
    const W = switch (wt) {
        .q4_0 => abi.BlockQ4_0,
        .q8_0 => abi.BlockQ8_0,
    };
    return struct {
        t: *const Table,
        w: [*]const W,
        x: [*]const abi.BlockQ8_0,
        nb: usize,
        y: [*]f32,

        fn run(ctx: *const anyopaque, begin: usize, end: usize) void {
            const self: *const @This() = @ptrCast(@alignCast(ctx));
            switch (wt) {
                .q4_0 => self.t.matvec_rows_q4_0(self.w, self.x, self.nb, self.y, begin, end),
                .q8_0 => self.t.matvec_rows_q8_0(self.w, self.x, self.nb, self.y, begin, end),
            }
        }
    };
}

/// Rows per pool chunk: about 64 KiB of weights, at least one row.
fn chunkRows(row_bytes: usize) usize {
    return @max(1, (64 * 1024) / @max(1, row_bytes));
}

fn matvec(t: *const Table, comptime wt: WeightType, w_raw: ?*const anyopaque, w_len: usize, rows: usize, cols: usize, x_raw: ?*const anyopaque, x_len: usize, y_raw: ?*anyopaque, y_len: usize) CheckError!i32 {
    if (rows == 0) return error.InvalidArg;
    const nb = try blocksOf(cols);
    const row_bytes = try mul(nb, blockBytes(wt));
    try need(w_len, try mul(rows, row_bytes));
    try need(x_len, try mul(nb, abi.q8_0_block_bytes));
    try need(y_len, rows);
    const y = try typedMut(f32, y_raw);
    const x = try typed(abi.BlockQ8_0, x_raw);
    const W = switch (wt) {
        .q4_0 => abi.BlockQ4_0,
        .q8_0 => abi.BlockQ8_0,
    };
    const ctx = MatvecCtx(wt){ .t = t, .w = try typed(W, w_raw), .x = x, .nb = nb, .y = y };
    runPooled(.{ .run = MatvecCtx(wt).run, .ctx = &ctx, .items = rows, .chunk = chunkRows(row_bytes) });
    return ok();
}

/// int32_t cf_rms_norm(const float *x, const float *weight, size_t n, float eps, float *out)
pub export fn cf_rms_norm(x: ?*const anyopaque, weight: ?*const anyopaque, n: usize, eps: f32, out: ?*anyopaque) i32 {
    const t = table() orelse return Status.not_initialized.code();
    if (n == 0 or !std.math.isFinite(eps) or eps < 0) return Status.invalid_arg.code();
    const xp = typed(f32, x) catch |e| return statusOf(e);
    const wp = typed(f32, weight) catch |e| return statusOf(e);
    const op = typedMut(f32, out) catch |e| return statusOf(e);
    t.rms_norm(xp, wp, n, eps, op);
    return ok();
}

/// int32_t cf_softmax(float *x, size_t n): in place; -7 (x unchanged) if x
/// holds NaN or +inf or is all -inf.
pub export fn cf_softmax(x: ?*anyopaque, n: usize) i32 {
    const t = table() orelse return Status.not_initialized.code();
    if (n == 0) return Status.invalid_arg.code();
    const xp = typedMut(f32, x) catch |e| return statusOf(e);
    return if (t.softmax(xp, n)) ok() else Status.nonfinite.code();
}

/// int32_t cf_argmax_f32(const float *x, size_t n, uint64_t *index): the
/// greedy pick. 0 with *index the first position of the largest value (ties:
/// the lowest), or n when every value is -inf; -7 with *index the first NaN
/// or +inf.
pub export fn cf_argmax_f32(x: ?*const anyopaque, n: usize, index: ?*anyopaque) i32 {
    const t = table() orelse return Status.not_initialized.code();
    if (n == 0) return Status.invalid_arg.code();
    const xp = typed(f32, x) catch |e| return statusOf(e);
    const out = typedMut(u64, index) catch |e| return statusOf(e);
    var at: usize = undefined;
    const status = t.argmax(xp, n, &at);
    out[0] = at;
    return switch (status) {
        0, 1 => ok(),
        2 => Status.nonfinite.code(),
        else => unreachable,
    };
}

/// int32_t cf_rope(float *x, size_t x_len, size_t n_heads, size_t head_dim,
///     size_t n_rot, uint32_t pos, const float *inv_freq, size_t inv_freq_len, uint32_t mode)
pub export fn cf_rope(x: ?*anyopaque, x_len: usize, n_heads: usize, head_dim: usize, n_rot: usize, pos: u32, inv_freq: ?*const anyopaque, inv_freq_len: usize, mode: u32) i32 {
    const t = table() orelse return Status.not_initialized.code();
    if (mode > 1 or n_heads == 0 or head_dim == 0) return Status.invalid_arg.code();
    if (n_rot == 0 or n_rot % 2 != 0 or n_rot > head_dim) return Status.invalid_arg.code();
    if (pos > abi.rope_max_pos) return Status.range.code();
    const total = mul(n_heads, head_dim) catch |e| return statusOf(e);
    if (x_len < total or inv_freq_len < n_rot / 2) return Status.length.code();
    const xp = typedMut(f32, x) catch |e| return statusOf(e);
    const fp = typed(f32, inv_freq) catch |e| return statusOf(e);
    t.rope(xp, n_heads, head_dim, n_rot, pos, fp, mode);
    return ok();
}

/// int32_t cf_silu_mul(const float *gate, const float *up, float *out, size_t n)
pub export fn cf_silu_mul(gate: ?*const anyopaque, up: ?*const anyopaque, out: ?*anyopaque, n: usize) i32 {
    const t = table() orelse return Status.not_initialized.code();
    return gated(t.silu_mul, gate, up, out, n);
}

/// int32_t cf_gelu_mul(const float *gate, const float *up, float *out, size_t n)
pub export fn cf_gelu_mul(gate: ?*const anyopaque, up: ?*const anyopaque, out: ?*anyopaque, n: usize) i32 {
    const t = table() orelse return Status.not_initialized.code();
    return gated(t.gelu_mul, gate, up, out, n);
}

fn gated(f: anytype, gate: ?*const anyopaque, up: ?*const anyopaque, out: ?*anyopaque, n: usize) i32 {
    if (n == 0) return Status.invalid_arg.code();
    const g = typed(f32, gate) catch |e| return statusOf(e);
    const u = typed(f32, up) catch |e| return statusOf(e);
    const o = typedMut(f32, out) catch |e| return statusOf(e);
    f(g, u, o, n);
    return ok();
}

/// wasm32 has no 64-bit atomics and no threads: a u64 with the same calls.
/// Volatile, because the job writes it through the context's const pointer.
const PlainFold = struct {
    raw: u64,
    fn init(v: u64) PlainFold {
        return .{ .raw = v };
    }
    fn fetchXor(self: *PlainFold, v: u64, comptime _: std.builtin.AtomicOrder) u64 {
        const p: *volatile u64 = &self.raw;
        const old = p.*;
        p.* = old ^ v;
        return old;
    }
    fn load(self: *const PlainFold, comptime _: std.builtin.AtomicOrder) u64 {
        const p: *const volatile u64 = &self.raw;
        return p.*;
    }
};

const StreamCtx = struct {
    t: *const Table,
    p: [*]const u8,
    fold: if (is_wasm) PlainFold else std.atomic.Value(u64) = .init(0),

    fn run(ctx: *const anyopaque, begin: usize, end: usize) void {
        const self: *StreamCtx = @constCast(@as(*const StreamCtx, @ptrCast(@alignCast(ctx))));
        const r = self.t.stream_read(self.p + begin, end - begin);
        _ = self.fold.fetchXor(r, .monotonic);
    }
};

/// int32_t cf_stream_read(const uint8_t *p, size_t len, uint64_t *out):
/// reads every byte once over the pool (the bandwidth yardstick).
pub export fn cf_stream_read(p: ?*const anyopaque, len: usize, out: ?*anyopaque) i32 {
    const t = table() orelse return Status.not_initialized.code();
    if (len == 0) return Status.invalid_arg.code();
    const bytes = typed(u8, p) catch |e| return statusOf(e);
    const o = typedMut(u64, out) catch |e| return statusOf(e);
    var ctx = StreamCtx{ .t = t, .p = bytes };
    // 1 MiB chunks: 128-byte multiples so the fold is independent of the split.
    runPooled(.{ .run = StreamCtx.run, .ctx = &ctx, .items = len, .chunk = 1 << 20 });
    o[0] = ctx.fold.load(.monotonic);
    return ok();
}

// ---------------------------------------------------------------------------
// Tiled matrices and attention
// ---------------------------------------------------------------------------

const kern = struct {
    const tile_rows: usize = 128;
    const tile_cols: usize = 256;
    fn tileBytes(t: u32, rows: usize, cols: usize) usize {
        const groups = rows * ((cols + qk - 1) / qk);
        return 16 + switch (t) {
            1 => groups * 18,
            2 => groups * 34,
            else => rows * cols * 4,
        };
    }
    fn stripeBytes(t: u32, tr: usize, cols: usize) usize {
        var total: usize = 0;
        var c0: usize = 0;
        while (c0 < cols) : (c0 += tile_cols) total += tileBytes(t, tr, @min(tile_cols, cols - c0));
        return total;
    }
};

pub const max_members: usize = 8;

const TilesCtx = struct {
    t: *const Table,
    tile_type: u32,
    base: [*]const u8,
    cols: usize,
    n_members: usize,
    rows: [max_members]usize,
    stripes: [max_members]usize,
    full: [max_members]usize,
    last: [max_members]usize,
    y_off: [max_members]usize,
    xq: [*]const abi.BlockQ8_0,
    xq_len: usize,
    xf: [*]const f32,
    xf_len: usize,
    y: [*]f32,

    /// Bytes of member m's stripes [0, s).
    fn before(self: *const TilesCtx, m: usize, s: usize) usize {
        const ns = self.stripes[m];
        if (s >= ns) return (ns - 1) * self.full[m] + self.last[m];
        return s * self.full[m];
    }

    fn run(ctx: *const anyopaque, begin: usize, end: usize) void {
        const self: *const TilesCtx = @ptrCast(@alignCast(ctx));
        for (begin..end) |s| {
            var pos: usize = 0;
            for (0..self.n_members) |m| pos += self.before(m, s);
            for (0..self.n_members) |m| {
                if (s >= self.stripes[m]) continue;
                const r0 = s * kern.tile_rows;
                const tr = @min(kern.tile_rows, self.rows[m] - r0);
                self.t.tile_stripe(self.tile_type, self.base + pos, tr, self.cols, self.xq, self.xq_len, self.xf, self.xf_len, self.y + self.y_off[m] + r0);
                pos += if (s + 1 == self.stripes[m]) self.last[m] else self.full[m];
            }
        }
    }
};

/// int32_t cf_tiles_matvec(int32_t handle, size_t offset, size_t length, uint32_t tile_type,
///     size_t cols, uint32_t n_members, const uint32_t *member_rows,
///     const uint8_t *xq, size_t xq_len, const float *xf, size_t xf_len, float *y, size_t y_len)
///
/// y = W x for the tiled run [offset, offset + length) of a mapped region:
/// one matrix, or up to 8 interleaved by output stripe (fused Q/K/V,
/// gate/up), whose outputs land one after another in y. Quantized tiles
/// take Q8_0 activations (xq), F32 tiles f32 ones (xf).
pub export fn cf_tiles_matvec(handle: i32, offset: usize, length: usize, tile_type: u32, cols: usize, n_members: u32, member_rows: ?*const anyopaque, xq: ?*const anyopaque, xq_len: usize, xf: ?*const anyopaque, xf_len: usize, y: ?*anyopaque, y_len: usize) i32 {
    const t = table() orelse return Status.not_initialized.code();
    return tilesMatvec(t, handle, offset, length, tile_type, cols, n_members, member_rows, xq, xq_len, xf, xf_len, y, y_len) catch |e| statusOf(e);
}

fn tilesMatvec(t: *const Table, handle: i32, offset: usize, length: usize, tile_type: u32, cols: usize, n_members: u32, member_rows: ?*const anyopaque, xq_raw: ?*const anyopaque, xq_len: usize, xf_raw: ?*const anyopaque, xf_len: usize, y_raw: ?*anyopaque, y_len: usize) CheckError!i32 {
    if (tile_type < 1 or tile_type > 3 or cols == 0 or cols > (1 << 20)) return error.InvalidArg;
    if (n_members == 0 or n_members > max_members) return error.InvalidArg;
    const rows_in = try typed(u32, member_rows);
    var ctx = TilesCtx{
        .t = t,
        .tile_type = tile_type,
        .base = undefined,
        .cols = cols,
        .n_members = n_members,
        .rows = undefined,
        .stripes = undefined,
        .full = undefined,
        .last = undefined,
        .y_off = undefined,
        .xq = undefined,
        .xq_len = 0,
        .xf = undefined,
        .xf_len = 0,
        .y = try typedMut(f32, y_raw),
    };
    var total_rows: usize = 0;
    var expected: usize = 0;
    var max_stripes: usize = 0;
    for (0..n_members) |m| {
        const rows: usize = rows_in[m];
        if (rows == 0) return error.InvalidArg;
        ctx.rows[m] = rows;
        ctx.stripes[m] = (rows + kern.tile_rows - 1) / kern.tile_rows;
        ctx.full[m] = kern.stripeBytes(tile_type, @min(kern.tile_rows, rows), cols);
        ctx.last[m] = kern.stripeBytes(tile_type, rows - (ctx.stripes[m] - 1) * kern.tile_rows, cols);
        ctx.y_off[m] = total_rows;
        total_rows = std.math.add(usize, total_rows, rows) catch return error.Overflow;
        expected += (ctx.stripes[m] - 1) * ctx.full[m] + ctx.last[m];
        max_stripes = @max(max_stripes, ctx.stripes[m]);
    }
    if (expected != length) return error.Length;
    try need(y_len, total_rows);
    if (tile_type == 3) {
        ctx.xf = try typed(f32, xf_raw);
        try need(xf_len, cols);
        ctx.xf_len = xf_len;
        ctx.xq = @ptrFromInt(@alignOf(abi.BlockQ8_0));
    } else {
        ctx.xq = try typed(abi.BlockQ8_0, xq_raw);
        const groups = (cols + qk - 1) / qk;
        try need(xq_len, try mul(groups, abi.q8_0_block_bytes));
        ctx.xq_len = groups;
        ctx.xf = @ptrFromInt(@alignOf(f32));
    }
    var err: i32 = 0;
    ctx.base = memory.rangePtr(handle, offset, length, &err) orelse return err;
    runPooled(.{ .run = TilesCtx.run, .ctx = &ctx, .items = max_stripes, .chunk = 1 });
    return ok();
}

const AttnCtx = struct {
    t: *const Table,
    kv_type: u32,
    q: [*]const f32,
    hd: usize,
    group: usize,
    k: *const anyopaque,
    v: *const anyopaque,
    stride: usize,
    first: usize,
    n_pos: usize,
    scale: f32,
    softcap: f32,
    scores: [*]f32,
    out: [*]f32,

    fn run(ctx: *const anyopaque, begin: usize, end: usize) void {
        const self: *const AttnCtx = @ptrCast(@alignCast(ctx));
        for (begin..end) |h| {
            const kvh = h / self.group;
            self.t.attention_head(self.kv_type, self.q + h * self.hd, self.hd, self.k, self.v, self.stride, kvh * self.hd, self.first, self.n_pos, self.scale, self.softcap, self.scores + h * self.n_pos, self.out + h * self.hd);
        }
    }
};

/// int32_t cf_attention(const float *q, uint32_t n_heads, uint32_t n_kv_heads, uint32_t head_dim,
///     const void *k_cache, const void *v_cache, uint32_t kv_type, size_t cache_len,
///     uint32_t first, uint32_t n_pos, float scale, float softcap,
///     float *scores, size_t scores_len, float *out, size_t out_len)
///
/// Grouped-query attention of one token over cache rows [first, n_pos):
/// rows are n_kv_heads * head_dim values (kv_type 1 = f32, 2 = f16); query
/// head h reads KV head h / (n_heads / n_kv_heads).
pub export fn cf_attention(q: ?*const anyopaque, n_heads: u32, n_kv_heads: u32, head_dim: u32, k_cache: ?*const anyopaque, v_cache: ?*const anyopaque, kv_type: u32, cache_len: usize, first: u32, n_pos: u32, scale: f32, softcap: f32, scores: ?*anyopaque, scores_len: usize, out: ?*anyopaque, out_len: usize) i32 {
    const t = table() orelse return Status.not_initialized.code();
    return attention(t, q, n_heads, n_kv_heads, head_dim, k_cache, v_cache, kv_type, cache_len, first, n_pos, scale, softcap, scores, scores_len, out, out_len) catch |e| statusOf(e);
}

fn attention(t: *const Table, q_raw: ?*const anyopaque, n_heads: u32, n_kv: u32, hd: u32, k_raw: ?*const anyopaque, v_raw: ?*const anyopaque, kv_type: u32, cache_len: usize, first: u32, n_pos: u32, scale: f32, softcap: f32, scores_raw: ?*anyopaque, scores_len: usize, out_raw: ?*anyopaque, out_len: usize) CheckError!i32 {
    if (n_heads == 0 or n_kv == 0 or hd == 0 or n_heads % n_kv != 0) return error.InvalidArg;
    if (kv_type != 1 and kv_type != 2) return error.InvalidArg;
    if (n_pos == 0 or first >= n_pos) return error.InvalidArg;
    if (!std.math.isFinite(scale) or !std.math.isFinite(softcap) or softcap < 0) return error.InvalidArg;
    const stride = try mul(n_kv, hd);
    try need(cache_len, try mul(n_pos, stride));
    try need(scores_len, try mul(n_heads, n_pos));
    try need(out_len, try mul(n_heads, hd));
    const q = try typed(f32, q_raw);
    if (kv_type == 1) {
        _ = try typed(f32, k_raw);
        _ = try typed(f32, v_raw);
    } else {
        _ = try typed(f16, k_raw);
        _ = try typed(f16, v_raw);
    }
    var ctx = AttnCtx{
        .t = t,
        .kv_type = kv_type,
        .q = q,
        .hd = hd,
        .group = n_heads / n_kv,
        .k = k_raw.?,
        .v = v_raw.?,
        .stride = stride,
        .first = first,
        .n_pos = n_pos,
        .scale = scale,
        .softcap = softcap,
        .scores = try typedMut(f32, scores_raw),
        .out = try typedMut(f32, out_raw),
    };
    runPooled(.{ .run = AttnCtx.run, .ctx = &ctx, .items = n_heads, .chunk = 1 });
    return ok();
}
