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
//! Here: the encoding and creation; `plan_check.zig` checks operations
//! and runs at creation; `plan_exec.zig` runs a plan, its executor doing
//! the matmuls and MoE; `plan_rows.zig` runs the operations that are not
//! matmuls, row by row (`plan_slices.zig`: one row's gated or quantize
//! operation cut among the threads); `plan_matmul.zig` cuts a matmul among the threads;
//! `plan_pack.zig` packs tiled runs into panels.

const std = @import("std");
const abi = @import("abi.zig");
const is_wasm = @import("builtin").cpu.arch == .wasm32;
const memory = if (is_wasm) @import("memory_wasm.zig") else @import("memory.zig");
const packing = @import("packing.zig");
const blocks = @import("blocks.zig");
const pool_mod = if (is_wasm) @import("pool_wasm.zig") else @import("pool.zig");
/// Plans' own small tables (ops, runs): libc's malloc natively, the wasm
/// allocator in linear memory in the wasm32 build.
const plan_allocator = if (is_wasm) std.heap.wasm_allocator else std.heap.c_allocator;
const Table = @import("table.zig").Table;
/// Direct reads into staging slots (the disk expert tier); native only.
const io = if (is_wasm) struct {} else @import("io.zig");

const assert = std.debug.assert;
const Status = abi.Status;
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
pub var plans_lock: std.Thread.Mutex = .{};
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

pub fn lookup(handle: i32) ?*Plan {
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
// Running (plan_exec.zig).
// ---------------------------------------------------------------------------

const exec = @import("plan_exec.zig");
pub const run = exec.run;
pub const runOps = exec.runOps;
pub const runRows = exec.runRows;
pub const setCancel = exec.setCancel;
pub const Exec = exec.Exec;
pub const quantizeRow = exec.quantizeRow;
pub const quantizeGroups = exec.quantizeGroups;
pub const expf32 = exec.expf32;
const releaseHeld = exec.releaseHeld;

// ---------------------------------------------------------------------------
// Packing a tiled run into panels (plan_pack.zig).
// ---------------------------------------------------------------------------

pub const pack = @import("plan_pack.zig").pack;

test "f32 run bytes" {
    const l = packing.Run.one(.q8_0, 300, 32);
    try std.testing.expectEqual(@as(usize, 38448), f32Bytes(&l));
}
