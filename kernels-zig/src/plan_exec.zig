//! Running a plan (plan.zig): checking a run's tokens, positions and rows,
//! then `Exec`, which executes one operation over the rows of a batch (the
//! matmuls and MoE here; the operations that are not matmuls in
//! plan_rows.zig and plan_slices.zig, a matmul's cut among the threads in
//! plan_matmul.zig), and the activation quantization they share.

const std = @import("std");
const abi = @import("abi.zig");
const is_wasm = @import("builtin").cpu.arch == .wasm32;
const memory = if (is_wasm) @import("memory_wasm.zig") else @import("memory.zig");
const packing = @import("packing.zig");
const blocks = @import("blocks.zig");
const Table = @import("table.zig").Table;
/// Direct reads into staging slots (the disk expert tier); native only.
const io = if (is_wasm) struct {} else @import("io.zig");
const prefetch = if (is_wasm) struct {} else @import("prefetch.zig");
const plan = @import("plan.zig");
const check = @import("plan_check.zig");

const assert = std.debug.assert;
const Status = abi.Status;
const qk = abi.qk;
const ActRow = packing.ActRow;
const Plan = plan.Plan;
const Env = plan.Env;
const Error = plan.Error;
const Op = plan.Op;
const Run = plan.Run;
const op_words = plan.op_words;
const statusOf = plan.statusOf;
const lookup = plan.lookup;
const isPacked = plan.isPacked;
const isQuant = check.isQuant;
const max_batch = plan.max_batch;
const MoeScratch = plan.MoeScratch;

const rows_mod = @import("plan_rows.zig");
const SliceCtx = @import("plan_slices.zig").SliceCtx;
const RowCtx = rows_mod.RowCtx;
const attentionParts = rows_mod.attentionParts;
const mm = @import("plan_matmul.zig");

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
        plan.plans_lock.lock();
        defer plan.plans_lock.unlock();
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
pub fn releaseHeld(p: *Plan) void {
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
    plan.plans_lock.lock();
    defer plan.plans_lock.unlock();
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
    return k.quantize_act(
        x[g0 * qk ..].ptr,
        g1 - g0,
        @ptrCast(q + g0 * abi.q8_0_block_bytes),
        q + ActRow.scalesOffset(ng) + g0 * 4,
        q + ActRow.sumsOffset(ng) + g0 * 4,
    );
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
