//! Plans, at creation: every operation's buffers, for the largest batch,
//! inside the workspace; every run's length what its layout implies; every
//! argument in range (plan.zig runs what passes). The run layout's sizes
//! and offsets (tiles, stripes) are here too, for the executor's reads.

const std = @import("std");
const abi = @import("abi.zig");
const plan = @import("plan.zig");
const packing = @import("packing.zig");
const blocks = @import("blocks.zig");
const is_wasm = @import("builtin").cpu.arch == .wasm32;
const memory = if (is_wasm) @import("memory_wasm.zig") else @import("memory.zig");
const io = if (is_wasm) struct {} else @import("io.zig");

const ActRow = packing.ActRow;
const qk = abi.qk;
const act_q8_k = @import("act_q8_k.zig");
const Error = plan.Error;
const Op = plan.Op;
const Run = plan.Run;
const RunKind = plan.RunKind;
const mul = plan.mul;
const add = plan.add;
const word64 = plan.word64;
const max_dim = plan.max_dim;
const isPacked = plan.isPacked;
const panelQuant = plan.panelQuant;
const MoeScratch = plan.MoeScratch;
const max_experts = plan.max_experts;

/// Checks buffers against the workspace's length, for every row of the
/// plan's largest batch.
pub const Checker = struct {
    ws_len: usize,
    max_tokens: usize,

    /// A buffer of `row_bytes` per row at `off`, rows `stride` apart (0: one
    /// shared row), for every row of the largest batch; 4-byte aligned.
    pub fn buf(self: Checker, off: u32, stride: u32, row_bytes: usize) Error!void {
        if (row_bytes == 0) return error.InvalidArg;
        if (off % 4 != 0 or stride % 4 != 0) return error.Alignment;
        if (stride != 0 and stride < row_bytes) return error.InvalidArg;
        const last = try mul(stride, self.max_tokens - 1);
        const end = try add(try add(off, last), row_bytes);
        if (end > self.ws_len) return error.Range;
    }

    /// One row of `bytes` shared by the batch.
    fn one(self: Checker, off: u32, bytes: usize) Error!void {
        return self.buf(off, 0, bytes);
    }
};

/// A dimension: 1 to `max_dim`.
pub fn dim(v: u32) Error!usize {
    if (v == 0 or v > max_dim) return error.InvalidArg;
    return v;
}

/// Bytes of a head-major KV cache of `context` positions of `kv_dim` values
/// (heads of `head_dim`) stored as kv_type: 1 f32, 2 f16, 3 Q8_0 blocks of
/// 32 values and an f16 scale (34 bytes; each head row whole blocks).
pub fn kvCacheBytes(kv_type: u32, context: usize, kv_dim: usize, head_dim: usize) Error!usize {
    const values = try mul(context, kv_dim);
    return switch (kv_type) {
        1 => try mul(values, 4),
        2 => try mul(values, 2),
        3 => if (head_dim % abi.qk != 0) error.InvalidArg else try mul(values / abi.qk, @sizeOf(abi.BlockQ8_0)),
        else => error.InvalidArg,
    };
}

/// An f32 argument (its bits): finite.
pub fn finite(bits: u32) Error!f32 {
    const f: f32 = @bitCast(bits);
    if (!std.math.isFinite(f)) return error.InvalidArg;
    return f;
}

/// A run's words: its kind, layout and member types in range, its bytes
/// exactly what the layout implies and inside its pinned region (pinned
/// here; the caller unpins it if the plan is refused).
pub fn checkRun(words: []const u32, out: *Run) Error!void {
    if (words[0] < 1 or words[0] > 11) return error.InvalidArg;
    const kind: RunKind = @enumFromInt(words[0]);
    const cols = try dim(words[6]);
    const n_members = words[7];
    if (n_members == 0 or n_members > packing.max_members) return error.InvalidArg;
    out.* = .{
        .kind = kind,
        .types = undefined,
        .packable = false,
        .quant = kind != .tiles_f32,
        .handle = @bitCast(words[1]),
        .base = undefined,
        .len = word64(words[4], words[5]),
        .layout = packing.Run.one(.q8_0, 0, cols),
        .total_rows = 0,
        .row_off = undefined,
        .panel_off = undefined,
    };
    out.layout.n_members = n_members;
    out.panel_off[0] = 0;
    for (0..n_members) |m| {
        const rows = try dim(words[8 + m]);
        out.layout.rows[m] = rows;
        out.row_off[m] = out.total_rows;
        out.total_rows += rows;
        out.panel_off[m + 1] = out.panel_off[m] + packing.panelsOf(rows);
    }
    for (0..packing.max_members) |m| {
        const t: u32 = if (kind != .tiles and kind != .packed_mixed) 0 else words[16 + m];
        if (m >= n_members) {
            if (t != 0) return error.InvalidArg;
            out.types[m] = .f32;
            continue;
        }
        out.types[m] = switch (kind) {
            .tiles_q4_0, .packed_q4_0 => .q4_0,
            .tiles_q8_0, .packed_q8_0 => .q8_0,
            .packed_q4_1 => .q4_1,
            .packed_q4_k => .q4_k,
            .packed_q6_k => .q6_k,
            .packed_q5_0 => .q5_0,
            .tiles_f32 => .f32,
            .tiles, .packed_mixed => if (t >= 1 and t <= blocks.max_tile_type) @enumFromInt(t) else return error.InvalidArg,
            _ => return error.InvalidArg,
        };
        const ty = out.types[m];
        // One input per run: every member quantized, or every one float.
        if (blocks.isFloat(ty) == out.quant) {
            if (m != 0) return error.InvalidArg;
            out.quant = !blocks.isFloat(ty);
        }
        // ggml's rule: a row holds whole blocks (Q4_0/Q8_0 tiles pad instead).
        if (blocks.asBlock(ty) != null and cols % blocks.blockElements(ty) != 0) return error.InvalidArg;
    }
    // Each member's panel type: packed runs must have one, tiles runs whose
    // members all have one can be packed (packing.zig reads their blocks),
    // if the members share one kind of ActRow and the columns are whole
    // records: groups of 32 (tiles pad a row's last group with zero
    // weights; panels do not), super-blocks of 256 for the K types.
    var all_panels = out.quant;
    var k_members: usize = 0;
    for (0..n_members) |m| {
        if (panelQuant(out.types[m])) |q| {
            out.layout.qs[m] = q;
            if (packing.isK(q)) k_members += 1;
            if (cols % packing.recordCols(q) != 0) all_panels = false;
        } else {
            all_panels = false;
        }
    }
    if (k_members != 0 and k_members != n_members) all_panels = false;
    if (isPacked(kind) and !all_panels) return error.InvalidArg;
    out.packable = kind != .tiles_f32 and !isPacked(kind) and all_panels;
    const expected = switch (kind) {
        .tiles_q4_0, .tiles_q8_0 => out.layout.sourceBytes(),
        .tiles_f32 => f32Bytes(&out.layout),
        .tiles => try tilesBytes(out),
        .packed_q4_0, .packed_q8_0, .packed_q4_1, .packed_q4_k, .packed_q6_k, .packed_q5_0, .packed_mixed => out.layout.packedBytes(),
        _ => return error.InvalidArg,
    };
    if (expected != out.len) return error.Length;
    const offset = word64(words[2], words[3]);
    var view: memory.View = undefined;
    var err: i32 = 0;
    if (!memory.pin(out.handle, &view, &err)) return error.Handle;
    errdefer memory.unpin(out.handle);
    const end = try add(offset, out.len);
    if (end > view.len) return error.Range;
    out.base = @as([*]const u8, @ptrFromInt(view.ptr)) + offset;
}

/// Bytes of an f32 tiled run of layout l.
pub fn f32Bytes(l: *const packing.Run) usize {
    var total: usize = 0;
    for (0..l.n_members) |m| {
        var r0: usize = 0;
        while (r0 < l.rows[m]) : (r0 += packing.tile_rows) {
            const tr: usize = @min(packing.tile_rows, l.rows[m] - r0);
            var c0: usize = 0;
            while (c0 < l.cols) : (c0 += packing.tile_cols) {
                total += packing.tile_header_bytes + tr * @as(usize, @min(packing.tile_cols, l.cols - c0)) * 4;
            }
        }
    }
    return total;
}

/// Bytes of one tile of `t` (docs/FORMAT.md).
pub fn tileBytesOf(t: blocks.TileType, tr: usize, tc: usize) usize {
    return packing.tile_header_bytes + switch (t) {
        .q4_0 => tr * packing.groupsOf(tc) * (2 + 16),
        .q8_0 => tr * packing.groupsOf(tc) * (2 + 32),
        else => tr * blocks.rowBytes(t, tc),
    };
}

/// Bytes of one output stripe (its column tiles) of a member of type `t`.
pub fn stripeBytesOf(t: blocks.TileType, tr: usize, cols: usize) usize {
    const full = cols / packing.tile_cols;
    const rest = cols - full * packing.tile_cols;
    var total = full * tileBytesOf(t, tr, packing.tile_cols);
    if (rest > 0) total += tileBytesOf(t, tr, rest);
    return total;
}

/// Offset of member m's stripe s in a tiled run: stripe by stripe, members
/// in order within a stripe; only a member's last stripe can be short. The
/// sum is taken per member (O(members)), not stripe by stripe.
pub fn stripeOffsetOf(r: *const Run, m: usize, s: usize) usize {
    const l = &r.layout;
    var pos: usize = 0;
    for (0..l.n_members) |mi| {
        const n = l.stripes(mi);
        const before = @min(s, n);
        if (before > 0) {
            const last_rows = l.rows[mi] - (before - 1) * packing.tile_rows;
            pos += (before - 1) * stripeBytesOf(r.types[mi], packing.tile_rows, l.cols);
            pos += stripeBytesOf(r.types[mi], @min(packing.tile_rows, last_rows), l.cols);
        }
        if (mi < m and s < n) pos += stripeBytesOf(r.types[mi], @min(packing.tile_rows, l.rows[mi] - s * packing.tile_rows), l.cols);
    }
    return pos;
}

/// Bytes of a `tiles` run, overflow-checked (rows and cols are bounded by
/// max_dim, so each stripe's size fits; the sum is checked).
pub fn tilesBytes(r: *const Run) Error!usize {
    var total: usize = 0;
    for (0..r.layout.n_members) |m| {
        const n = r.layout.stripes(m);
        const last = r.layout.rows[m] - (n - 1) * packing.tile_rows;
        total = try add(total, try mul(n - 1, stripeBytesOf(r.types[m], packing.tile_rows, r.layout.cols)));
        total = try add(total, stripeBytesOf(r.types[m], last, r.layout.cols));
    }
    return total;
}

/// Whether the run's matmuls read quantized activations (ActRows).
pub fn isQuant(r: *const Run) bool {
    return r.quant;
}

/// The staging area a plan's operations name: pinned at the first one.
pub const StageUse = struct {
    handle: i32 = 0,
    slots: usize = 0,

    /// Pins the staging area `raw` names at the first use; later uses must name it too.
    fn use(self: *StageUse, raw: u32) Error!void {
        if (is_wasm) return error.InvalidArg;
        const h: i32 = @bitCast(raw);
        if (self.handle != 0) {
            if (h != self.handle) return error.InvalidArg; // one staging area per plan
            return;
        }
        var info: io.StageInfo = undefined;
        io.pin(h, &info) catch return error.Handle;
        self.handle = h;
        self.slots = @intCast(info.n_slots);
    }

    /// Unpins the staging area, if one was pinned.
    pub fn release(self: *StageUse) void {
        if (is_wasm) return;
        if (self.handle != 0) io.unpin(self.handle);
        self.handle = 0;
    }
};

/// One operation's words: its opcode, flags and arguments in range, every
/// buffer it names inside the workspace, its runs of the shape it needs.
pub fn checkOp(c: Checker, w: []const u32, runs: []const Run, context: u32, vocab: *u32, stage: *StageUse) Error!void {
    const op = std.meta.intToEnum(Op, w[0]) catch return error.InvalidArg;
    if (w[1] > 1) return error.InvalidArg;
    const a = w[2..];
    switch (op) {
        .embed => {
            if (a[0] >= runs.len) return error.Range;
            const r = &runs[a[0]];
            if (r.layout.n_members != 1) return error.InvalidArg;
            try c.buf(a[1], a[2], try mul(r.layout.cols, 4));
            _ = try finite(a[3]);
            if (vocab.* != 0 and vocab.* != r.total_rows) return error.InvalidArg;
            vocab.* = @intCast(r.total_rows);
        },
        .rms_norm => {
            const n = try dim(a[5]);
            try c.buf(a[0], a[1], n * 4);
            try c.one(a[2], n * 4);
            try c.buf(a[3], a[4], n * 4);
            if (try finite(a[6]) < 0) return error.InvalidArg;
        },
        .quantize, .quantize_k => {
            const n = try dim(a[2]);
            if (n % (if (op == .quantize) qk else act_q8_k.qk_k) != 0) return error.Length;
            try c.buf(a[0], a[1], n * 4);
            try c.buf(a[3], a[4], ActRow.bytes(n / qk));
        },
        .matmul => {
            if (a[0] >= runs.len) return error.Range;
            const r = &runs[a[0]];
            const in_bytes = if (isQuant(r)) ActRow.bytes(packing.groupsOf(r.layout.cols)) else r.layout.cols * 4;
            try c.buf(a[1], a[2], in_bytes);
            try c.buf(a[3], a[4], try mul(r.total_rows, 4));
        },
        .add => {
            const n = try dim(a[4]);
            try c.buf(a[0], a[1], n * 4);
            try c.buf(a[2], a[3], n * 4);
        },
        .add_vec => {
            const n = try dim(a[3]);
            try c.buf(a[0], a[1], n * 4);
            try c.one(a[2], n * 4);
        },
        .head_norm => {
            const heads = try dim(a[2]);
            const hd = try dim(a[3]);
            try c.buf(a[0], a[1], try mul(heads, hd) * 4);
            try c.one(a[4], hd * 4);
            if (try finite(a[5]) < 0) return error.InvalidArg;
        },
        .rope => {
            const heads = try dim(a[2]);
            const hd = try dim(a[3]);
            const n_rot = try dim(a[4]);
            if (n_rot % 2 != 0 or n_rot > hd or a[6] > 1) return error.InvalidArg;
            if (context > abi.rope_max_pos) return error.InvalidArg;
            try c.buf(a[0], a[1], try mul(heads, hd) * 4);
            try c.one(a[5], n_rot / 2 * 4);
        },
        .kv_store => {
            const kv_dim = try dim(a[3]);
            const hd = try dim(a[5]);
            if (kv_dim % hd != 0) return error.InvalidArg;
            try c.buf(a[0], a[1], kv_dim * 4);
            try c.one(a[2], try kvCacheBytes(a[4], context, kv_dim, hd));
        },
        .attention => {
            const heads = try dim(a[5]);
            const n_kv = try dim(a[6]);
            const hd = try dim(a[7]);
            if (heads % n_kv != 0) return error.InvalidArg;
            _ = try finite(a[9]);
            if (try finite(a[10]) < 0) return error.InvalidArg;
            const kv_bytes = try kvCacheBytes(a[4], context, n_kv * hd, hd);
            const elt: usize = if (a[4] == 1) 4 else if (a[4] == 2) 2 else 1;
            if (a[2] % elt != 0 or a[3] % elt != 0) return error.Alignment;
            try c.buf(a[0], a[1], heads * hd * 4);
            try c.one(a[2], kv_bytes);
            try c.one(a[3], kv_bytes);
            try c.buf(a[11], a[12], heads * hd * 4);
        },
        .gated => {
            if (a[0] > 1) return error.InvalidArg;
            const n = try dim(a[5]);
            try c.buf(a[1], a[2], n * 8);
            try c.buf(a[3], a[4], n * 4);
        },
        .softcap => {
            const n = try dim(a[2]);
            try c.buf(a[0], a[1], n * 4);
            if (try finite(a[3]) <= 0) return error.InvalidArg;
        },
        .route => {
            const n = try dim(a[3]);
            const n_exp = a[4];
            const top_k = a[5];
            if (n_exp == 0 or n_exp > max_experts or top_k == 0 or top_k > n_exp or a[6] > 1) return error.InvalidArg;
            try c.buf(a[0], a[1], n * 4);
            try c.one(a[2], try mul(try mul(n_exp, n), 4));
            try c.buf(a[7], a[8], @as(usize, top_k) * 8);
        },
        .moe => {
            const n_exp = a[2];
            const top_k = a[3];
            if (n_exp == 0 or n_exp > max_experts or top_k == 0 or top_k > n_exp or a[8] > 1) return error.InvalidArg;
            if (try add(a[0], n_exp) > runs.len or try add(a[1], n_exp) > runs.len) return error.Range;
            const g0 = &runs[a[0]];
            if (g0.layout.n_members != 2 or g0.layout.rows[0] != g0.layout.rows[1]) return error.InvalidArg;
            const hidden = g0.layout.cols;
            const effn = g0.layout.rows[0];
            for (0..n_exp) |e| {
                const g = &runs[a[0] + e];
                const d = &runs[a[1] + e];
                if (g.kind != g0.kind or d.kind != g0.kind or g.quant != g0.quant or d.quant != g0.quant) return error.InvalidArg;
                if (g.layout.n_members != 2 or g.layout.cols != hidden or g.layout.rows[0] != effn or g.layout.rows[1] != effn) return error.InvalidArg;
                if (d.layout.n_members != 1 or d.layout.cols != effn or d.layout.rows[0] != hidden) return error.InvalidArg;
            }
            const quant = isQuant(g0);
            try c.buf(a[4], a[5], @as(usize, top_k) * 8);
            try c.buf(a[6], a[7], if (quant) ActRow.bytes(packing.groupsOf(hidden)) else hidden * 4);
            if (a[10] % 64 != 0 or a[9] % 64 != 0) return error.Alignment;
            try c.buf(a[9], a[10], MoeScratch.of(hidden, effn, quant).bytes);
            try c.buf(a[11], a[12], hidden * 4);
            if (a[13] % 8 != 0) return error.Alignment;
            try c.one(a[13], 8);
        },
        .gate_scale => {
            const n_y = try dim(a[2]);
            const n_x = try dim(a[6]);
            try c.buf(a[0], a[1], n_y * 4);
            try c.one(a[3], n_x * 4);
            try c.buf(a[4], a[5], n_x * 4);
        },
        .timestamp => {
            if (a[0] % 8 != 0) return error.Alignment;
            try c.one(a[0], 8);
        },
        .fetch => {
            const n_exp = a[2];
            const top_k = a[3];
            if (n_exp == 0 or n_exp > max_experts or top_k == 0 or top_k > n_exp) return error.InvalidArg;
            try stage.use(a[0]);
            try c.buf(a[4], a[5], @as(usize, top_k) * 12);
            if (a[6] % 8 != 0) return error.Alignment;
            try c.one(a[6], @as(usize, n_exp) * 16);
        },
        .moe_staged => {
            const top_k = a[3];
            if (a[2] == 0 or a[2] > max_experts or top_k == 0 or top_k > a[2] or a[8] > 1) return error.InvalidArg;
            try stage.use(a[0]);
            if (try add(a[1], 2) > runs.len) return error.Range;
            const g = &runs[a[1]];
            const d = &runs[a[1] + 1];
            if (g.layout.n_members != 2 or g.layout.rows[0] != g.layout.rows[1] or d.kind != g.kind or d.quant != g.quant) return error.InvalidArg;
            if (d.layout.n_members != 1 or d.layout.cols != g.layout.rows[0] or d.layout.rows[0] != g.layout.cols) return error.InvalidArg;
            if (isPacked(g.kind)) return error.InvalidArg;
            const hidden = g.layout.cols;
            const quant = isQuant(g);
            try c.buf(a[4], a[5], @as(usize, top_k) * 12);
            try c.buf(a[6], a[7], if (quant) ActRow.bytes(packing.groupsOf(hidden)) else hidden * 4);
            if (a[10] % 64 != 0 or a[9] % 64 != 0) return error.Alignment;
            try c.buf(a[9], a[10], MoeScratch.of(hidden, g.layout.rows[0], quant).bytes);
            try c.buf(a[11], a[12], hidden * 4);
            if (a[13] % 8 != 0) return error.Alignment;
            try c.one(a[13], 8);
        },
        .lincomb => {
            const n = try dim(a[6]);
            try c.buf(a[0], a[1], n * 4);
            const alpha = try finite(a[7]);
            if (alpha != 0) try c.buf(a[2], a[3], n * 4);
            try c.buf(a[4], a[5], n * 4);
            _ = try finite(a[8]);
        },
        _ => return error.InvalidArg,
    }
}
