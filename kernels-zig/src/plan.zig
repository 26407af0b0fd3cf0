//! Plans: the forward pass of one or more tokens as a list of operations,
//! decided in TypeScript and run here in one FFI call, with the worker pool
//! spinning between operations instead of being woken once per kernel.
//!
//! A plan names bytes, never pointers: activations, norms and the KV cache
//! live at byte offsets of one workspace allocation, and weights are runs
//! (region handle, offset, length, layout). Everything is checked once, when
//! the plan is created: every operation's every row of every buffer, for
//! the largest batch the plan accepts, lies inside the workspace; every run
//! has exactly the length its layout implies. A run then only checks its
//! tokens, its positions and its batch size. The regions a plan reads are
//! pinned: they cannot be released while the plan exists.
//!
//! Operations are 16 u32 words: opcode, flags (bit 0: last row only), then
//! the arguments listed at `Op`. Buffers are a byte offset and a row stride
//! in bytes (0 for a single row shared by the batch). Row t of a batch is
//! the token at position pos + t.
//!
//! Here: the encoding, creation and the executor (matmuls, MoE);
//! `plan_check.zig` checks operations and runs at creation; `plan_rows.zig`
//! runs the operations that are not matmuls, row by row; `plan_matmul.zig`
//! cuts a matmul among the threads; `plan_pack.zig` packs tiled runs into
//! panels.

const std = @import("std");
const abi = @import("abi.zig");
const is_wasm = @import("builtin").cpu.arch == .wasm32;
const memory = if (is_wasm) @import("memory_wasm.zig") else @import("memory.zig");
const packing = @import("packing.zig");
const blocks = @import("blocks.zig");
const act_q8_k = @import("act_q8_k.zig");
const pool_mod = if (is_wasm) @import("pool_wasm.zig") else @import("pool.zig");
/// Plans' own small tables (ops, runs): libc's malloc natively, the wasm
/// allocator in linear memory in the wasm32 build.
const plan_allocator = if (is_wasm) std.heap.wasm_allocator else std.heap.c_allocator;
const Table = @import("table.zig").Table;
/// Direct reads into staging slots (the disk expert tier); native only.
const io = if (is_wasm) struct {} else @import("io.zig");
const prefetch = if (is_wasm) struct {} else @import("prefetch.zig");

const assert = std.debug.assert;
const Status = abi.Status;
const qk = abi.qk;
const ActRow = packing.ActRow;

pub const op_words: usize = 16;
/// kind, region, offset (2 words), length (2), cols, n_members, rows[8],
/// then for kinds `tiles` and `packed_mixed` the tile type of each member (8;
/// zero past n_members).
pub const run_words: usize = 24;
pub const max_ops: usize = 1 << 16;
pub const max_runs: usize = 1 << 14;
pub const max_batch: u32 = 1024;
pub const max_context: u32 = 1 << 22;
pub const max_plans: usize = 64;
/// Query heads sharing one KV head that the attention kernel takes at once
/// (attention.zig `attention_max_group`); larger groups go in several calls.
pub const attention_max_group: usize = 16;
/// The largest dimension an operation or run may name.
pub const max_dim: u32 = 1 << 20;

pub const Op = enum(u32) {
    /// run, out, out_stride, scale (f32 bits): row tokens[t] of member 0, times scale.
    embed = 1,
    /// x, x_stride, w, out, out_stride, n, eps
    rms_norm = 2,
    /// x, x_stride, n (a multiple of 32), q, q_stride: ActRows (packing.zig).
    quantize = 3,
    /// run, in, in_stride, y, y_stride: y = W in (ActRows, or f32 rows for F32 tiles).
    matmul = 4,
    /// a, a_stride, b, b_stride, n: a += b.
    add = 5,
    /// a, a_stride, b, n: a += b (one vector for every row).
    add_vec = 6,
    /// v, v_stride, n_heads, head_dim, w, eps: RMSNorm of every head, in place.
    head_norm = 7,
    /// x, x_stride, n_heads, head_dim, n_rot, freqs, mode
    rope = 8,
    /// src, src_stride, cache, kv_dim, kv_type (1 f32, 2 f16, 3 Q8_0 blocks:
    /// head_dim a multiple of 32), head_dim: row t to position
    /// pos + t of a head-major cache ([kv head][position][head_dim]), so that
    /// attention streams each head's keys and values contiguously.
    kv_store = 9,
    /// q, q_stride, k, v, kv_type, n_heads, n_kv, head_dim, window, scale, softcap, out, out_stride
    attention = 10,
    /// kind (0 SiLU, 1 GELU), gu, gu_stride, out, out_stride, n: out = act(gu[0,n)) * gu[n,2n).
    gated = 11,
    /// x, x_stride, n, cap (f32 bits): x = cap tanh(x / cap).
    softcap = 12,
    /// x, x_stride, router, n, n_experts, top_k, flags, sel, sel_stride: the
    /// router's f32 logits R x (R at `router`, n_experts rows of n), their
    /// softmax p and the top_k largest p (ties: lower index first), written
    /// as top_k u32 expert ids then top_k f32 weights; flags bit 0: the
    /// weights renormalized to sum 1, else the p themselves.
    route = 13,
    /// gate_up_run0, down_run0, n_experts, top_k, sel, sel_stride, x, x_stride,
    /// act (0 SiLU, 1 GELU), scratch, scratch_stride, out, out_stride, counter:
    /// out += sum_j w_j down_e(act(gate_e x) * up_e x) over each row's
    /// selected experts e (runs gate_up_run0 + e and down_run0 + e). Rows
    /// that chose the same expert share one read of its weights; the bytes
    /// of the experts read are added to the u64 at `counter`.
    moe = 14,
    /// y, y_stride, n_y, v, x, x_stride, n_x: y *= sigmoid(v . x).
    gate_scale = 15,
    /// out, out_stride, a, a_stride, b, b_stride, n, alpha, beta (f32 bits):
    /// out = alpha a + beta b; with alpha 0, a is not read; with both 0,
    /// neither is (out = 0).
    lincomb = 16,
    /// slot: the monotonic clock in nanoseconds, as a u64 at `slot` (8-byte
    /// aligned): marks between sections, so that one run reports where its
    /// time went without a call per section.
    timestamp = 17,
    /// stage, layer, n_experts, top_k, sel, sel_stride, spans: for every
    /// row's selected experts (a `route` selection row of top_k ids, top_k
    /// weights, then top_k slot words this op fills), pins expert e of
    /// `layer` in a slot of the staging area `stage`, starting its read from
    /// the file range spans[e] (n_experts pairs of u64 offset, length in the
    /// workspace) unless it is cached. Returns at once: the reads run while
    /// the following operations do.
    fetch = 18,
    /// stage, template, n_experts, top_k, sel, sel_stride, x, x_stride, act,
    /// scratch, scratch_stride, out, out_stride, counter: `moe` over the
    /// experts a `fetch` pinned, reading each expert's tiles from its slot
    /// (laid out as runs `template` (gate/up) and `template + 1` (down),
    /// whose own bytes are not read) after waiting for its read; then
    /// unpins them. The bytes of the experts used are added to `counter`.
    moe_staged = 19,
    /// x, x_stride, n (a multiple of 256), q, q_stride: Q8_K quantization
    /// (act_q8_k.zig, ggml's rule for the activations of K-quant weights)
    /// into ActRows: one scale per 256 values, repeated in each group's slot.
    quantize_k = 20,
    _,
};

/// `tiles`: `.cflow` tiles whose members' types are given one by one (any
/// tile type, docs/FORMAT.md); members are all quantized or all float.
/// `packed_q4_k`, `packed_q6_k`: K-quant panels (packing.zig, "K records"),
/// packed from tiles runs whose members are all Q4_K or all Q6_K;
/// `packed_q5_0`: Q5_0 panels (the Q4_0 record with the rows' fifth bits);
/// `packed_mixed`: panels of a fused run whose members have different panel
/// types, member after member (types given one by one, as for `tiles`), all
/// read from one kind of ActRow: every member a K type (Q8_K rows) or none.
pub const RunKind = enum(u32) { tiles_q4_0 = 1, tiles_q8_0 = 2, tiles_f32 = 3, packed_q4_0 = 4, packed_q8_0 = 5, tiles = 6, packed_q4_1 = 7, packed_q4_k = 8, packed_q6_k = 9, packed_q5_0 = 10, packed_mixed = 11, _ };

/// Whether runs of this kind hold 16-row panels (read by the panel kernels).
pub fn isPacked(kind: RunKind) bool {
    return switch (kind) {
        .packed_q4_0, .packed_q8_0, .packed_q4_1, .packed_q4_k, .packed_q6_k, .packed_q5_0, .packed_mixed => true,
        else => false,
    };
}

/// The panel type a member of tile type t packs into (null: none).
pub fn panelQuant(t: blocks.TileType) ?packing.Quant {
    return switch (t) {
        .q4_0 => .q4_0,
        .q8_0 => .q8_0,
        .q4_1 => .q4_1,
        .q5_0 => .q5_0,
        .q4_k => .q4_k,
        .q6_k => .q6_k,
        else => null,
    };
}

/// A run once checked: its layout, member types, pinned bytes and panel offsets.
pub const Run = struct {
    kind: RunKind,
    /// Tile type of each member (packed runs: the type it was packed from).
    types: [packing.max_members]blocks.TileType,
    /// Tile runs: every member has a panel type, all read from one kind of
    /// ActRow, and the columns are whole records (`layout.qs` holds them).
    packable: bool,
    /// Its input is ActRows (quantized types) rather than f32 rows.
    quant: bool,
    handle: i32,
    base: [*]const u8,
    len: usize,
    layout: packing.Run,
    total_rows: usize,
    /// Output row offset and first panel of each member.
    row_off: [packing.max_members]usize,
    panel_off: [packing.max_members + 1]usize,
};

/// A checked plan: its operations, runs, workspace and state between runs.
pub const Plan = struct {
    generation: u32 = 0,
    live: bool = false,
    busy: std.atomic.Value(bool) = .init(false),
    /// Set from another thread (cf_plan_cancel) while a run is in flight:
    /// the run stops before its next operation.
    cancel: std.atomic.Value(u32) = .init(0),
    ws_handle: i32 = 0,
    ws: [*]u8 = undefined,
    ws_len: usize = 0,
    ops: []u32 = &.{},
    runs: []Run = &.{},
    /// The distinct regions among the runs, checked before every run so a
    /// mapped file truncated or rewritten since it was mapped is refused.
    regions: []i32 = &.{},
    max_tokens: u32 = 0,
    context: u32 = 0,
    vocab: u32 = 0,
    /// The staging area the fetch/moe_staged operations use (0: none),
    /// pinned while the plan exists, and per slot what this plan holds in it.
    stage: i32 = 0,
    held: []Held = &.{},
    /// RoPE's cos and sin for the rows of the run in progress, one table per
    /// distinct frequency vector of the plan's rope operations (a layer of
    /// Gemma 3 has one of two): every layer's rope reads them instead of
    /// taking the sine and cosine again (`Exec.ropeAngles`).
    rope: [max_rope_tables]RopeTable = [_]RopeTable{.{}} ** max_rope_tables,
};

/// Distinct RoPE frequency vectors a plan keeps tables for; rope operations
/// with any other take their angles themselves, with the same arithmetic.
pub const max_rope_tables = 4;

/// One frequency vector's cos/sin table: `pairs` pairs per row for up to the
/// plan's largest batch, valid for the run in progress once `ready`.
pub const RopeTable = struct {
    /// The frequencies' workspace offset and how many pairs rotate.
    freqs: u32 = 0,
    pairs: u32 = 0,
    /// max_tokens x 2 x pairs floats (empty: no table).
    cs: []f32 = &.{},
    ready: bool = false,
};

/// A staging slot's pins taken by this plan's fetches and not yet released,
/// and where the fetched expert's bytes are.
const Held = struct {
    pins: u32 = 0,
    data: [*]const u8 = undefined,
    len: usize = 0,
};

var plans: [max_plans]Plan = [_]Plan{.{}} ** max_plans;
var plans_lock: std.Thread.Mutex = .{};
const index_bits = 6;
comptime {
    assert(max_plans == 1 << index_bits);
}

pub const Env = struct {
    t: *const Table,
    run: *const fn (job: pool_mod.Job) void,
    /// Threads `run` spreads a job over (1 where it runs jobs inline): only
    /// how work is cut into claims depends on it, never a result.
    threads: usize = 1,
};

/// What creating or running a plan can fail with (`statusOf` gives the status code).
pub const Error = error{ InvalidArg, Length, Alignment, Overflow, Range, Handle, NoMemory, Busy, Limit, Nonfinite, Changed, Io };

pub fn statusOf(e: Error) i32 {
    return switch (e) {
        error.InvalidArg => Status.invalid_arg.code(),
        error.Length => Status.length.code(),
        error.Alignment => Status.alignment.code(),
        error.Overflow => Status.overflow.code(),
        error.Range => Status.range.code(),
        error.Handle => Status.handle.code(),
        error.NoMemory => Status.no_memory.code(),
        error.Busy => Status.busy.code(),
        error.Limit => Status.limit.code(),
        error.Nonfinite => Status.nonfinite.code(),
        error.Changed => Status.changed.code(),
        error.Io => abi.io_base - 5, // EIO: a staged expert read failed
    };
}

/// a * b, or `error.Overflow`.
pub fn mul(a: usize, b: usize) Error!usize {
    return std.math.mul(usize, a, b) catch error.Overflow;
}

/// a + b, or `error.Overflow`.
pub fn add(a: usize, b: usize) Error!usize {
    return std.math.add(usize, a, b) catch error.Overflow;
}

/// The 64-bit value of two u32 words, low first.
pub fn word64(lo: u32, hi: u32) usize {
    return @intCast((@as(u64, hi) << 32) | lo);
}

// ---------------------------------------------------------------------------
// Creation: everything is checked here (plan_check.zig).
// ---------------------------------------------------------------------------

const check = @import("plan_check.zig");
const Checker = check.Checker;
const StageUse = check.StageUse;
const checkRun = check.checkRun;
const checkOp = check.checkOp;
const f32Bytes = check.f32Bytes;
const isQuant = check.isQuant;

/// Most experts of a MoE layer (the `.cflow` limit).
pub const max_experts: u32 = 1024;

/// One row of a `moe` operation's scratch: the gathered input, gate|up,
/// the activation, its quantization (quantized runs) and the expert's
/// output, each 64-byte aligned.
pub const MoeScratch = struct {
    xg: usize,
    gu: usize,
    hb: usize,
    hq: usize,
    y: usize,
    bytes: usize,

    fn up64(n: usize) usize {
        return (n + 63) / 64 * 64;
    }

    /// The layout for an expert of `effn` hidden units over `hidden`-wide rows.
    pub fn of(hidden: usize, effn: usize, quant: bool) MoeScratch {
        const x_bytes = if (quant) ActRow.bytes(packing.groupsOf(hidden)) else hidden * 4;
        var s: MoeScratch = undefined;
        s.xg = 0;
        s.gu = up64(x_bytes);
        s.hb = s.gu + up64(2 * effn * 4);
        s.hq = s.hb + up64(effn * 4);
        s.y = s.hq + (if (quant) up64(ActRow.bytes(packing.groupsOf(effn))) else 0);
        s.bytes = s.y + up64(hidden * 4);
        return s;
    }
};

test "moe scratch layout" {
    const s = MoeScratch.of(64, 32, true);
    try std.testing.expect(s.gu % 64 == 0 and s.hb > s.gu and s.hq >= s.hb + 128 and s.y > s.hq and s.bytes >= s.y + 256);
    const f = MoeScratch.of(64, 32, false);
    try std.testing.expectEqual(f.hq, f.y);
}

/// Creates a plan; returns a handle (> 0) or a status code, with `where`
/// set to {1, run index} or {2, operation index} when one is refused.
pub fn create(ws_handle: i32, ops_in: []const u32, runs_in: []const u32, max_tokens: u32, context: u32, where: *[2]u32) i32 {
    where.* = .{ 0, 0 };
    return createInner(ws_handle, ops_in, runs_in, max_tokens, context, where) catch |e| statusOf(e);
}

fn createInner(ws_handle: i32, ops_in: []const u32, runs_in: []const u32, max_tokens: u32, context: u32, where: *[2]u32) Error!i32 {
    if (ops_in.len == 0 or ops_in.len % op_words != 0 or ops_in.len / op_words > max_ops) return error.InvalidArg;
    if (runs_in.len % run_words != 0 or runs_in.len / run_words > max_runs) return error.InvalidArg;
    if (max_tokens == 0 or max_tokens > max_batch) return error.InvalidArg;
    if (context == 0 or context > max_context) return error.InvalidArg;
    if (!memory.isAlloc(ws_handle)) return error.Handle;
    const gpa = plan_allocator;

    const n_runs = runs_in.len / run_words;
    const runs = gpa.alloc(Run, n_runs) catch return error.NoMemory;
    var pinned: usize = 0;
    errdefer {
        for (runs[0..pinned]) |*r| memory.unpin(r.handle);
        gpa.free(runs);
    }
    for (0..n_runs) |i| {
        where.* = .{ 1, @intCast(i) };
        try checkRun(runs_in[i * run_words ..][0..run_words], &runs[i]);
        pinned += 1;
    }

    var view: memory.View = undefined;
    var err: i32 = 0;
    if (!memory.pin(ws_handle, &view, &err)) return error.Handle;
    errdefer memory.unpin(ws_handle);
    const checker = Checker{ .ws_len = view.len, .max_tokens = max_tokens };
    var vocab: u32 = 0;
    var stage = StageUse{};
    errdefer stage.release();
    for (0..ops_in.len / op_words) |i| {
        where.* = .{ 2, @intCast(i) };
        try checkOp(checker, ops_in[i * op_words ..][0..op_words], runs, context, &vocab, &stage);
    }
    const held = gpa.alloc(Held, stage.slots) catch return error.NoMemory;
    errdefer gpa.free(held);
    @memset(held, .{});
    where.* = .{ 0, 0 };
    const ops = gpa.dupe(u32, ops_in) catch return error.NoMemory;
    errdefer gpa.free(ops);
    var rope = [_]RopeTable{.{}} ** max_rope_tables;
    errdefer for (&rope) |*t| gpa.free(t.cs);
    for (0..ops.len / op_words) |i| {
        const w = ops[i * op_words ..][0..op_words];
        if (w[0] != @intFromEnum(Op.rope)) continue;
        const freqs = w[2 + 5];
        const pairs = w[2 + 4] / 2;
        for (&rope) |*t| {
            if (t.cs.len != 0 and t.freqs == freqs and t.pairs == pairs) break;
            if (t.cs.len != 0) continue;
            // checkOp bounded pairs by head_dim; max_tokens by max_batch.
            t.* = .{ .freqs = freqs, .pairs = pairs, .cs = gpa.alloc(f32, try mul(max_tokens, 2 * @as(usize, pairs))) catch return error.NoMemory };
            break;
        }
    }
    var n_regions: usize = 0;
    const distinct = gpa.alloc(i32, n_runs) catch return error.NoMemory;
    errdefer gpa.free(distinct);
    for (runs) |*r| {
        if (std.mem.indexOfScalar(i32, distinct[0..n_regions], r.handle) == null) {
            distinct[n_regions] = r.handle;
            n_regions += 1;
        }
    }
    assert(n_regions <= n_runs);

    plans_lock.lock();
    defer plans_lock.unlock();
    for (&plans, 0..) |*p, index| {
        if (p.live) continue;
        const generation = if (p.generation >= (1 << 24)) 1 else p.generation + 1;
        p.* = .{
            .generation = generation,
            .live = true,
            .ws_handle = ws_handle,
            .ws = @ptrFromInt(view.ptr),
            .ws_len = view.len,
            .ops = ops,
            .runs = runs,
            .regions = distinct[0..n_regions],
            .max_tokens = max_tokens,
            .context = context,
            .vocab = vocab,
            .stage = stage.handle,
            .held = held,
            .rope = rope,
        };
        return @intCast((generation << index_bits) | @as(u32, @intCast(index)));
    }
    return error.Limit;
}

fn lookup(handle: i32) ?*Plan {
    if (handle <= 0) return null;
    const h: u32 = @intCast(handle);
    const p = &plans[h & (max_plans - 1)];
    if (!p.live or p.generation != h >> index_bits) return null;
    return p;
}

/// Destroys a plan and unpins what it read.
pub fn destroy(handle: i32) i32 {
    plans_lock.lock();
    defer plans_lock.unlock();
    const p = lookup(handle) orelse return Status.handle.code();
    if (p.busy.load(.acquire)) return Status.busy.code();
    releaseHeld(p);
    if (!is_wasm and p.stage != 0) io.unpin(p.stage);
    plan_allocator.free(p.held);
    for (&p.rope) |*t| plan_allocator.free(t.cs);
    for (p.runs) |*r| memory.unpin(r.handle);
    memory.unpin(p.ws_handle);
    plan_allocator.free(p.runs);
    plan_allocator.free(p.ops);
    plan_allocator.free(p.regions.ptr[0..p.runs.len]);
    const generation = p.generation;
    p.* = .{ .generation = generation };
    return Status.ok.code();
}

// ---------------------------------------------------------------------------
// Running
// ---------------------------------------------------------------------------

/// Runs a plan over tokens at positions [pos, pos + tokens.len).
pub fn run(env: Env, handle: i32, tokens: []const u32, pos: u32) i32 {
    return runOps(env, handle, tokens, pos, 0, std.math.maxInt(u32));
}

/// Runs operations [first, last) of a plan (`last` clamped to the plan's
/// count), for profiling: running a plan's operations in consecutive ranges
/// does exactly what one run does.
pub fn runOps(env: Env, handle: i32, tokens: []const u32, pos: u32, first: u32, last: u32) i32 {
    return runWith(env, handle, tokens, .{ .pos = pos }, first, last);
}

/// Where each row of a run sits: consecutive positions from `pos` (one
/// sequence, the prompt or a decoded token), or per row a KV base and a
/// position (several sequences in one batch: row t stores its keys and
/// values at cache index `bases[t] + positions[t]`, attends over indices
/// [bases[t], bases[t] + positions[t]] within its window, and is rotated by
/// `positions[t]`). A caller keeping sequence s in the cache indices
/// [s * n, (s + 1) * n) runs any mix of sequences in one batch, and each row
/// gets exactly the arithmetic it gets alone.
pub const Rows = struct {
    pos: u32 = 0,
    bases: ?[]const u32 = null,
    positions: ?[]const u32 = null,

    /// Row t's position in its sequence.
    pub fn position(self: Rows, t: usize) u32 {
        return if (self.positions) |ps| ps[t] else self.pos + @as(u32, @intCast(t));
    }

    /// Row t's sequence's first index in the KV cache.
    pub fn base(self: Rows, t: usize) u32 {
        return if (self.bases) |bs| bs[t] else 0;
    }

    /// Whether rows [t0, t0 + n) are consecutive positions of one sequence.
    pub fn consecutive(self: Rows, t0: usize, n: usize) bool {
        if (self.bases == null) return true;
        for (t0 + 1..t0 + n) |t| {
            if (self.base(t) != self.base(t0) or
                @as(usize, self.position(t)) != @as(usize, self.position(t0)) + (t - t0)) return false;
        }
        return true;
    }
};

test "Rows.consecutive: one sequence's run of positions, not a mix" {
    const one: Rows = .{ .pos = 7 };
    try std.testing.expect(one.consecutive(0, 5));
    const mixed: Rows = .{ .bases = &.{ 0, 0, 0, 512 }, .positions = &.{ 3, 4, 5, 0 } };
    try std.testing.expect(mixed.consecutive(0, 3));
    try std.testing.expect(!mixed.consecutive(0, 4));
    try std.testing.expect(mixed.consecutive(3, 1));
    const gap: Rows = .{ .bases = &.{ 0, 0 }, .positions = &.{ 3, 5 } };
    try std.testing.expect(!gap.consecutive(0, 2));
}

/// Runs operations [first, last) for rows with their own KV bases and
/// positions ({@link Rows}). Every row's cache index must be inside the
/// context and no two rows may share one (their stores would race).
pub fn runRows(env: Env, handle: i32, tokens: []const u32, bases: []const u32, positions: []const u32, first: u32, last: u32) i32 {
    if (bases.len != tokens.len or positions.len != tokens.len) return Status.invalid_arg.code();
    return runWith(env, handle, tokens, .{ .bases = bases, .positions = positions }, first, last);
}

fn runWith(env: Env, handle: i32, tokens: []const u32, rows: Rows, first: u32, last: u32) i32 {
    const p = blk: {
        plans_lock.lock();
        defer plans_lock.unlock();
        const p = lookup(handle) orelse return Status.handle.code();
        if (p.busy.swap(true, .acq_rel)) return Status.busy.code();
        break :blk p;
    };
    defer p.busy.store(false, .release);
    if (tokens.len == 0 or tokens.len > p.max_tokens) return Status.invalid_arg.code();
    if (rows.positions) |ps| {
        const bs = rows.bases.?;
        assert(ps.len == tokens.len and bs.len == tokens.len);
        for (ps, bs, 0..) |q, b, t| {
            if (@as(u64, b) + q >= p.context) return Status.range.code();
            // Bounded: tokens.len <= max_tokens <= max_batch rows.
            for (0..t) |u| if (bs[u] + ps[u] == b + q) return Status.invalid_arg.code();
        }
    } else if (@as(u64, rows.pos) + tokens.len > p.context) return Status.range.code();
    if (p.vocab != 0) {
        for (tokens) |t| if (t >= p.vocab) return Status.range.code();
    }
    for (p.regions) |h| {
        const status = memory.checkFile(h);
        if (status != Status.ok.code()) return status;
    }
    const n_ops = p.ops.len / op_words;
    const end: usize = @min(@as(usize, last), n_ops);
    if (first > end) return Status.range.code();
    const ex = Exec{ .env = env, .p = p, .tokens = tokens, .rows = rows };
    // Staging pins live from a fetch to its moe_staged, possibly across the
    // calls of a run made section by section; a run that starts over, ends,
    // fails or is cancelled gives back whatever its fetches still hold.
    if (first == 0) releaseHeld(p);
    // The tables hold the angles of the previous run's rows.
    for (&p.rope) |*t| t.ready = false;
    var i: usize = @as(usize, first) * op_words;
    while (i < end * op_words) : (i += op_words) {
        if (p.cancel.load(.acquire) != 0) {
            releaseHeld(p);
            return Status.cancelled.code();
        }
        const ran = ex.op(p.ops[i .. end * op_words]) catch |e| {
            releaseHeld(p);
            return statusOf(e);
        };
        i += (ran - 1) * op_words;
    }
    if (end == n_ops) releaseHeld(p);
    return Status.ok.code();
}

/// Unpins every staging slot the plan's fetches still hold.
fn releaseHeld(p: *Plan) void {
    if (is_wasm) return;
    for (p.held, 0..) |*h, slot| {
        while (h.pins > 0) : (h.pins -= 1) io.release(p.stage, @intCast(slot));
    }
}

/// Sets (1) or clears (0) a plan's cancel flag. Safe from any thread while
/// the plan runs on another: the run checks the flag before every operation
/// and returns `cancelled`. The flag stays as set until set again, so the
/// caller clears it before starting a run it may cancel.
pub fn setCancel(handle: i32, value: u32) i32 {
    if (value > 1) return Status.invalid_arg.code();
    plans_lock.lock();
    defer plans_lock.unlock();
    const p = lookup(handle) orelse return Status.handle.code();
    p.cancel.store(value, .release);
    return Status.ok.code();
}

/// One operation over the rows of a batch.
pub const Exec = struct {
    env: Env,
    p: *Plan,
    tokens: []const u32,
    rows: Rows,

    /// n f32s of a workspace buffer (byte offset, row stride) at row `row`.
    pub fn f32s(self: *const Exec, off: usize, stride: usize, row: usize, n: usize) []f32 {
        const bytes = self.p.ws + off + stride * row;
        return @as([*]f32, @ptrCast(@alignCast(bytes)))[0..n];
    }

    /// The bytes of a workspace buffer (byte offset, row stride) at row `row`.
    pub fn bytesAt(self: *const Exec, off: usize, stride: usize, row: usize) [*]u8 {
        return self.p.ws + off + stride * row;
    }

    /// The cos and sin of every row of this run for rope operation `w`'s
    /// frequencies (n_rot floats a row), from the plan's table for them,
    /// filled by the first rope operation that reads it, on the calling
    /// thread: a row's pairs once, not once per layer. Null where the plan
    /// keeps no table for them.
    fn ropeAngles(self: *const Exec, w: []const u32) ?[]const f32 {
        const a = w[2..];
        for (&self.p.rope) |*t| {
            if (t.cs.len == 0 or t.freqs != a[5] or t.pairs != a[4] / 2) continue;
            if (!t.ready) {
                assert(self.tokens.len * 2 * t.pairs <= t.cs.len);
                const inv = self.f32s(t.freqs, 0, 0, t.pairs);
                for (0..self.tokens.len) |row| {
                    self.env.t.rope_angles(self.rows.position(row), inv.ptr, t.pairs, t.cs[row * 2 * t.pairs ..].ptr);
                }
                t.ready = true;
            }
            return t.cs;
        }
        return null;
    }

    /// Runs the operation at the start of `rest` (the operations left in
    /// this call), and the ones after it that fuse with it (`SliceCtx.fusesWith`,
    /// `fusedRows`); returns how many ran.
    fn op(self: *const Exec, rest: []const u32) Error!usize {
        const w = rest[0..op_words];
        const next: ?[]const u32 = if (rest.len >= 2 * op_words) rest[op_words..][0..op_words] else null;
        const last_only = w[1] & 1 != 0;
        const n_tok = self.tokens.len;
        const row0: usize = if (last_only) n_tok - 1 else 0;
        var ctx = RowCtx{ .ex = self, .w = w, .row0 = row0 };
        const rows = n_tok - row0;
        switch (@as(Op, @enumFromInt(w[0]))) {
            .matmul => try self.matmul(w[2..], row0, rows),
            .moe => try self.moe(w[2..], row0, rows),
            .fetch => try self.fetch(w[2..], row0, rows),
            .moe_staged => try self.moeStaged(w[2..], row0, rows),
            .timestamp => {
                const now: u64 = monotonicNs();
                std.mem.writeInt(u64, (self.p.ws + w[2])[0..8], now, .little);
            },
            .attention => {
                const n_kv = w[2 + 6];
                const group = w[2 + 5] / n_kv;
                ctx.parts = attentionParts(group, n_kv * rows, self.env.threads, self.env.t.attention_tile_heads());
                ctx.n_rows = rows;
                // Consecutive rows of one sequence (prefill, a speculative
                // check): items of several rows that read each K/V block once
                // for all of them (`attention_rows`), while at least 4 items
                // a thread are left to even the threads' shares (a 4-row
                // check of a model with one KV head stays 4 items).
                ctx.stack = 1;
                if (ctx.parts == 1 and rows > 1 and self.rows.consecutive(row0, rows)) {
                    const most = self.env.t.attention_stacked_rows(group, w[2 + 7]);
                    ctx.stack = @max(1, @min(most, n_kv * rows / (4 * self.env.threads)));
                }
                const chunks = std.math.divCeil(usize, rows, ctx.stack) catch unreachable;
                self.env.run(.{ .run = RowCtx.attention, .ctx = &ctx, .items = n_kv * chunks * ctx.parts, .chunk = 1 });
            },
            .gated, .quantize, .quantize_k => if (rows == 1) {
                // One row (decode): split it by elements instead, so that
                // every thread takes part (SliceCtx), with the quantization
                // of a gated output in the same job.
                var sc = SliceCtx{ .ex = self, .w = w, .t = row0 };
                if (next) |nw| {
                    if (SliceCtx.fusesWith(w, nw, row0)) sc.then = nw;
                }
                const n = sc.elements();
                self.env.run(.{ .run = SliceCtx.run, .ctx = &sc, .items = std.math.divCeil(usize, n, SliceCtx.slice) catch unreachable, .chunk = 1 });
                if (sc.failed.load(.acquire)) return error.Nonfinite;
                if (sc.then != null) return 2;
            } else {
                return self.rowOps(&ctx, rest, rows);
            },
            else => return self.rowOps(&ctx, rest, rows),
        }
        if (ctx.failed.load(.acquire)) return error.Nonfinite;
        return 1;
    }

    /// Runs the row operation at the start of `rest` and the row operations
    /// that follow it and fuse with it (`fusedRows`) as one job over the
    /// rows; returns how many ran.
    fn rowOps(self: *const Exec, ctx: *RowCtx, rest: []const u32, rows: usize) Error!usize {
        const n = if (rows > 1) rows_mod.fusedRows(rest) else 1;
        ctx.w = rest[0 .. n * op_words];
        ctx.n_ops = n;
        // RoPE tables are filled here, before the job reads them.
        for (0..n) |j| {
            const w = rest[j * op_words ..][0..op_words];
            ctx.rope_cs[j] = if (w[0] == @intFromEnum(Op.rope)) self.ropeAngles(w) else null;
        }
        self.env.run(.{ .run = RowCtx.rows, .ctx = ctx, .items = rows, .chunk = 1 });
        if (ctx.failed.load(.acquire)) return error.Nonfinite;
        return n;
    }

    fn matmul(self: *const Exec, a: []const u32, row0: usize, rows: usize) Error!void {
        const r = &self.p.runs[a[0]];
        if (!is_wasm and prefetch.isEnabled()) self.prefetchNext(a);
        self.matmulRows(r, self.p.ws + a[1] + a[2] * row0, a[2], @ptrCast(@alignCast(self.p.ws + a[3] + a[4] * row0)), a[4] / 4, rows);
    }

    /// Posts the weights of the next matmul after this one (`a` is this
    /// operation's argument words) to the prefetch thread.
    fn prefetchNext(self: *const Exec, a: []const u32) void {
        const p = self.p;
        const at = (@intFromPtr(a.ptr) - @intFromPtr(p.ops.ptr)) / @sizeOf(u32) - 2;
        var i = at + op_words;
        while (i < p.ops.len) : (i += op_words) {
            if (p.ops[i] != @intFromEnum(Op.matmul)) continue;
            const r = &p.runs[p.ops[i + 2]];
            prefetch.post(r.base, r.len);
            return;
        }
    }

    /// y = W in for `rows` rows of `in` (ActRows or f32), on the pool.
    fn matmulRows(self: *const Exec, r: *const Run, in: [*]const u8, in_stride: usize, y: [*]f32, y_stride: usize, rows: usize) void {
        var ctx = mm.MatCtx{
            .ex = self,
            .r = r,
            .in = in,
            .in_stride = in_stride,
            .y = y,
            .y_stride = y_stride,
            .n_tok = rows,
        };
        if (isPacked(r.kind)) {
            // One token: two long claims per thread (`streamChunk`); longer
            // sequential runs per claim are what the prefetchers want
            // (measured on SmolLM2 at 2 threads: 1-panel chunks decode at
            // ~200 tok/s, 4 at ~270, 8 at ~350, Q4_0). Several tokens:
            // `panelChunk`'s 6-10, so that the threads' shares come out even.
            const panels = r.panel_off[r.layout.n_members];
            const chunk = if (rows == 1) mm.streamChunk(panels, self.env.threads) else mm.panelChunk(panels, self.env.threads);
            self.env.run(.{ .run = mm.MatCtx.packedRun, .ctx = &ctx, .items = panels, .chunk = chunk });
        } else {
            var stripes: usize = 0;
            for (0..r.layout.n_members) |m| stripes = @max(stripes, r.layout.stripes(m));
            self.env.run(.{ .run = mm.MatCtx.tilesRun, .ctx = &ctx, .items = stripes, .chunk = 1 });
        }
    }

    /// Posts the next expert after `e` that a row of the batch chose (its
    /// gate/up and down are one span of the bank) to the prefetch thread.
    fn prefetchExpert(self: *const Exec, a: []const u32, e: usize, row0: usize, rows: usize) void {
        var next: u32 = std.math.maxInt(u32);
        for (row0..row0 + rows) |t| {
            const sel = self.bytesAt(a[4], a[5], t);
            for (0..a[3]) |j| {
                const id = std.mem.readInt(u32, sel[j * 4 ..][0..4], .little);
                if (id > e and id < a[2] and id < next) next = id;
            }
        }
        if (next == std.math.maxInt(u32)) return;
        const g = &self.p.runs[a[0] + next];
        const d = &self.p.runs[a[1] + next];
        // One range when down follows gate/up, as in the bank (a new post
        // replaces the one in progress).
        const contiguous = @intFromPtr(d.base) == @intFromPtr(g.base) + g.len;
        prefetch.post(g.base, if (contiguous) g.len + d.len else g.len);
    }

    /// Where an expert's input, activation, scratch and output are (words of
    /// the `moe` / `moe_staged` operation).
    const ExpertBufs = struct { x: u32, x_stride: u32, act: u32, scratch: u32, scratch_stride: u32, out: u32, out_stride: u32 };

    /// out[row] += weight * down(act(gate x[row]) * up x[row]) for the rows
    /// that chose this expert: gathered into the scratch, one read of the
    /// expert's gate/up and down runs for all of them, scattered back.
    fn expert(self: *const Exec, gr: *const Run, dr: *const Run, members: []const u32, weights: []const f32, b: ExpertBufs) Error!void {
        const k = self.env.t;
        const n = members.len;
        const hidden = gr.layout.cols;
        const effn = gr.layout.rows[0];
        const quant = isQuant(gr);
        const x_bytes = if (quant) ActRow.bytes(packing.groupsOf(hidden)) else hidden * 4;
        const sl = MoeScratch.of(hidden, effn, quant);
        const ss: usize = b.scratch_stride;
        const scratch = self.p.ws + b.scratch;
        for (0..n) |i| @memcpy((scratch + i * ss + sl.xg)[0..x_bytes], self.bytesAt(b.x, b.x_stride, members[i])[0..x_bytes]);
        self.matmulRows(gr, scratch + sl.xg, ss, @ptrCast(@alignCast(scratch + sl.gu)), ss / 4, n);
        for (0..n) |i| {
            const row = scratch + i * ss;
            const gu: [*]f32 = @ptrCast(@alignCast(row + sl.gu));
            const hb: [*]f32 = @ptrCast(@alignCast(row + sl.hb));
            if (b.act == 0) k.silu_mul(gu, gu + effn, hb, effn) else k.gelu_mul(gu, gu + effn, hb, effn);
            if (quant and !quantizeRow(k, hb[0..effn], row + sl.hq)) return error.Nonfinite;
        }
        self.matmulRows(dr, scratch + (if (quant) sl.hq else sl.hb), ss, @ptrCast(@alignCast(scratch + sl.y)), ss / 4, n);
        for (0..n) |i| {
            const y: [*]const f32 = @ptrCast(@alignCast(scratch + i * ss + sl.y));
            const out = self.f32s(b.out, b.out_stride, members[i], hidden);
            for (out, 0..) |*o, c| o.* += weights[i] * y[c];
        }
    }

    /// Pins each row's selected experts in staging slots, starting the
    /// reads of those not cached; writes the slot indices after the weights.
    fn fetch(self: *const Exec, a: []const u32, row0: usize, rows: usize) Error!void {
        if (is_wasm) return error.InvalidArg;
        const top_k = a[3];
        const p = self.p;
        for (row0..row0 + rows) |t| {
            const sel = self.bytesAt(a[4], a[5], t);
            for (0..top_k) |j| {
                const e = std.mem.readInt(u32, sel[j * 4 ..][0..4], .little);
                if (e >= a[2]) return error.Range;
                const span = self.p.ws + a[6] + @as(usize, e) * 16;
                const off = std.mem.readInt(u64, span[0..8], .little);
                const len = std.mem.readInt(u64, span[8..16], .little);
                var slot: io.Slot = undefined;
                io.acquire(p.stage, a[1], e, off, @intCast(len), &slot) catch |err| return switch (err) {
                    error.Limit => error.Limit,
                    error.Range => error.Range,
                    error.Length => error.Length,
                    error.Handle => error.Handle,
                    error.NoMemory => error.NoMemory,
                    error.Busy => error.Busy,
                    else => error.InvalidArg,
                };
                const h = &p.held[slot.index];
                h.pins += 1;
                h.data = slot.data;
                h.len = slot.length;
                std.mem.writeInt(u32, sel[(2 * top_k + j) * 4 ..][0..4], slot.index, .little);
            }
        }
    }

    /// `moe` over staged experts: per expert chosen by any row, wait for its
    /// slot, run its tiles from there, and release every pin at the end.
    fn moeStaged(self: *const Exec, a: []const u32, row0: usize, rows: usize) Error!void {
        if (is_wasm) return error.InvalidArg;
        const p = self.p;
        const n_exp = a[2];
        const top_k = a[3];
        const gt = &p.runs[a[1]];
        const dt = &p.runs[a[1] + 1];
        assert(rows <= max_batch);
        var members: [max_batch]u32 = undefined;
        var weights: [max_batch]f32 = undefined;
        var used: u64 = 0;
        for (0..n_exp) |e| {
            var n: usize = 0;
            var slot: u32 = std.math.maxInt(u32);
            for (row0..row0 + rows) |t| {
                const sel = self.bytesAt(a[4], a[5], t);
                for (0..top_k) |j| {
                    if (std.mem.readInt(u32, sel[j * 4 ..][0..4], .little) != e) continue;
                    members[n] = @intCast(t);
                    weights[n] = @bitCast(std.mem.readInt(u32, sel[(top_k + j) * 4 ..][0..4], .little));
                    slot = std.mem.readInt(u32, sel[(2 * top_k + j) * 4 ..][0..4], .little);
                    n += 1;
                }
            }
            if (n == 0) continue;
            if (slot >= p.held.len or p.held[slot].pins == 0) return error.InvalidArg;
            const h = &p.held[slot];
            if (h.len != gt.len + dt.len) return error.Length;
            // A truncated or rewritten file reads as changed/range; any other
            // failure of the read is an I/O error.
            const st = io.readStatus(p.stage, slot);
            if (st == Status.changed.code()) return error.Changed;
            if (st == Status.range.code()) return error.Range;
            if (st != 0) return error.Io;
            var gr = gt.*;
            gr.base = h.data;
            var dr = dt.*;
            dr.base = h.data + gt.len;
            used += h.len;
            try self.expert(&gr, &dr, members[0..n], weights[0..n], .{ .x = a[6], .x_stride = a[7], .act = a[8], .scratch = a[9], .scratch_stride = a[10], .out = a[11], .out_stride = a[12] });
        }
        // Unpin what the matching fetch pinned: one pin per row and choice.
        for (row0..row0 + rows) |t| {
            const sel = self.bytesAt(a[4], a[5], t);
            for (0..top_k) |j| {
                const slot = std.mem.readInt(u32, sel[(2 * top_k + j) * 4 ..][0..4], .little);
                if (slot >= p.held.len or p.held[slot].pins == 0) return error.InvalidArg;
                p.held[slot].pins -= 1;
                io.release(p.stage, slot);
            }
        }
        const counter = p.ws + a[13];
        const before = std.mem.readInt(u64, counter[0..8], .little);
        std.mem.writeInt(u64, counter[0..8], before +% used, .little);
    }

    /// The selected experts of every row: per expert, the rows that chose
    /// it are gathered into the scratch, run through its gate/up and down
    /// in one read of its weights, and scattered back, weighted, into out.
    fn moe(self: *const Exec, a: []const u32, row0: usize, rows: usize) Error!void {
        const n_exp = a[2];
        const top_k = a[3];
        assert(rows <= max_batch);
        var members: [max_batch]u32 = undefined;
        var weights: [max_batch]f32 = undefined;
        var read: u64 = 0;
        for (0..n_exp) |e| {
            var n: usize = 0;
            for (row0..row0 + rows) |t| {
                const sel = self.bytesAt(a[4], a[5], t);
                for (0..top_k) |j| {
                    const id = std.mem.readInt(u32, sel[j * 4 ..][0..4], .little);
                    if (id != e) continue;
                    members[n] = @intCast(t);
                    weights[n] = @bitCast(std.mem.readInt(u32, sel[(top_k + j) * 4 ..][0..4], .little));
                    n += 1;
                }
            }
            if (n == 0) continue;
            assert(n <= rows);
            const gr = &self.p.runs[a[0] + e];
            const dr = &self.p.runs[a[1] + e];
            read += gr.len + dr.len;
            if (!is_wasm and prefetch.isEnabled()) self.prefetchExpert(a, e, row0, rows);
            try self.expert(gr, dr, members[0..n], weights[0..n], .{ .x = a[6], .x_stride = a[7], .act = a[8], .scratch = a[9], .scratch_stride = a[10], .out = a[11], .out_stride = a[12] });
        }
        const counter = self.p.ws + a[13];
        const before = std.mem.readInt(u64, counter[0..8], .little);
        std.mem.writeInt(u64, counter[0..8], before +% read, .little);
    }
};

/// Q8_0 quantization of one row into an ActRow (blocks, f32 scales, sums);
/// false when the row holds a non-finite value.
pub fn quantizeRow(k: *const Table, x: []const f32, q: [*]u8) bool {
    return quantizeGroups(k, x, q, 0, x.len / qk);
}

/// Groups [g0, g1) of quantizeRow: each group's quants, scale and sum
/// depend on its 32 values only.
pub fn quantizeGroups(k: *const Table, x: []const f32, q: [*]u8, g0: usize, g1: usize) bool {
    const ng = x.len / qk;
    assert(g0 < g1 and g1 <= ng);
    if (!k.quantize_q8_0(x[g0 * qk ..].ptr, g1 - g0, @ptrCast(q + g0 * abi.q8_0_block_bytes))) return false;
    const so = ActRow.scalesOffset(ng);
    const su = ActRow.sumsOffset(ng);
    for (g0..g1) |g| {
        const blk = q + g * abi.q8_0_block_bytes;
        const d = abi.f16ToF32(@as(u16, blk[0]) | (@as(u16, blk[1]) << 8));
        const qv: @Vector(qk, i8) = @bitCast(blk[2..][0..qk].*);
        const sum: i32 = @reduce(.Add, @as(@Vector(qk, i32), qv));
        std.mem.writeInt(u32, (q + so + g * 4)[0..4], @bitCast(d), .little);
        std.mem.writeInt(i32, (q + su + g * 4)[0..4], sum, .little);
    }
    return true;
}

/// CLOCK_MONOTONIC in nanoseconds (0 in the wasm build, which has no clock).
pub fn monotonicNs() u64 {
    if (is_wasm) return 0;
    const ts = std.posix.clock_gettime(std.posix.CLOCK.MONOTONIC) catch return 0;
    return @as(u64, @intCast(ts.sec)) * std.time.ns_per_s + @as(u64, @intCast(ts.nsec));
}

/// e^x as the kernels compute it (glibc's expf natively, its port in wasm).
pub fn expf32(x: f32) f32 {
    if (is_wasm) return @import("expf.zig").expf(x);
    return @exp(x);
}

// ---------------------------------------------------------------------------
// The operations that are not matmuls (plan_rows.zig).
// ---------------------------------------------------------------------------

const rows_mod = @import("plan_rows.zig");
const SliceCtx = rows_mod.SliceCtx;
const RowCtx = rows_mod.RowCtx;
const attentionParts = rows_mod.attentionParts;

// ---------------------------------------------------------------------------
// Packing a tiled run into panels (plan_pack.zig).
// ---------------------------------------------------------------------------

pub const pack = @import("plan_pack.zig").pack;

// ---------------------------------------------------------------------------
// How a matmul is cut among the threads (plan_matmul.zig).
// ---------------------------------------------------------------------------

const mm = @import("plan_matmul.zig");

test "f32 run bytes" {
    const l = packing.Run.one(.q8_0, 300, 32);
    try std.testing.expectEqual(@as(usize, 38448), f32Bytes(&l));
}
