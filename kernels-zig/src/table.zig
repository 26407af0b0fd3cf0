//! The dispatch table: one function pointer per kernel, filled from one
//! variant's exports. Shared by `variant.zig` (which exports every field
//! under its prefix) and `root.zig` (which binds the prefix it selected).

const abi = @import("abi.zig");

pub const Table = struct {
    quantize_q8_0: *const fn ([*]const f32, usize, [*]abi.BlockQ8_0) callconv(.c) bool,
    /// x, blocks, their Q8_0 blocks, each block's scale as f32 and its sum of
    /// quants as i32 (little-endian, 4 bytes apart): an ActRow's groups
    /// (packing.zig) in one call of the variant's vectors.
    quantize_act: *const fn ([*]const f32, usize, [*]abi.BlockQ8_0, [*]u8, [*]u8) callconv(.c) bool,
    block_dots_q4_0: *const fn ([*]const abi.BlockQ4_0, [*]const abi.BlockQ8_0, usize, [*]i32) callconv(.c) void,
    block_dots_q8_0: *const fn ([*]const abi.BlockQ8_0, [*]const abi.BlockQ8_0, usize, [*]i32) callconv(.c) void,
    matvec_rows_q4_0: *const fn ([*]const abi.BlockQ4_0, [*]const abi.BlockQ8_0, usize, [*]f32, usize, usize) callconv(.c) void,
    matvec_rows_q8_0: *const fn ([*]const abi.BlockQ8_0, [*]const abi.BlockQ8_0, usize, [*]f32, usize, usize) callconv(.c) void,
    rms_norm: *const fn ([*]const f32, [*]const f32, usize, f32, [*]f32) callconv(.c) void,
    softmax: *const fn ([*]f32, usize) callconv(.c) bool,
    /// x, n, the index found; returns `kernels.Argmax.Status`.
    argmax: *const fn ([*]const f32, usize, *usize) callconv(.c) u32,
    rope: *const fn ([*]f32, usize, usize, usize, u32, [*]const f32, u32) callconv(.c) void,
    /// pos, inv_freq, pairs, cs (2 x pairs): each pair's cos and sin at pos (`ropeAngles`).
    rope_angles: *const fn (u32, [*]const f32, usize, [*]f32) callconv(.c) void,
    /// x, heads, head_dim, n_rot, cs (n_rot floats from `rope_angles`), mode: `rope` from a table.
    rope_table: *const fn ([*]f32, usize, usize, usize, [*]const f32, u32) callconv(.c) void,
    silu_mul: *const fn ([*]const f32, [*]const f32, [*]f32, usize) callconv(.c) void,
    gelu_mul: *const fn ([*]const f32, [*]const f32, [*]f32, usize) callconv(.c) void,
    stream_read: *const fn ([*]const u8, usize) callconv(.c) u64,
    tile_stripe: *const fn (u32, [*]const u8, usize, usize, [*]const abi.BlockQ8_0, usize, [*]const f32, usize, [*]f32) callconv(.c) void,
    attention_head: *const fn (u32, [*]const f32, usize, *const anyopaque, *const anyopaque, usize, usize, usize, usize, f32, f32, [*]f32, [*]f32) callconv(.c) void,
    attention_group: *const fn (u32, [*]const f32, usize, usize, *const anyopaque, *const anyopaque, usize, usize, usize, usize, f32, f32, [*]f32) callconv(.c) void,
    /// kv type, q, q row stride (floats), rows, group, hd, K, V, stride, head offset, first,
    /// n_pos of row 0, scale, softcap, out, out row stride: consecutive rows of one sequence
    /// together (attention.zig `attentionRows`).
    attention_rows: *const fn (u32, [*]const f32, usize, usize, usize, usize, *const anyopaque, *const anyopaque, usize, usize, usize, usize, f32, f32, [*]f32, usize) callconv(.c) void,
    /// Query heads `attention_group` takes through one register tile (each K and V value
    /// converted once for them): what cutting a group into parts costs (plan_rows.zig).
    attention_tile_heads: *const fn () callconv(.c) usize,
    /// Rows `attention_rows` takes together for a group of heads of hd values (`stackedRows`).
    attention_stacked_rows: *const fn (usize, usize) callconv(.c) usize,
    f32_to_f16: *const fn ([*]const f32, [*]f16, usize) callconv(.c) void,
    packed_panels: *const fn (u32, [*]const u8, usize, usize, [*]const u8, usize, usize, [*]f32, usize, usize) callconv(.c) void,
    /// Tile types 4..11 (blocks.zig): type, stripe, rows, cols, activations, their stride, tokens, y, y stride.
    block_stripe: *const fn (u32, [*]const u8, usize, usize, [*]const u8, usize, usize, [*]f32, usize) callconv(.c) void,
    /// Bit 1: one-token panel kernels prefetch ahead as they stream (else the hardware alone); bit 2:
    /// the first block of several tokens prefetches to L2 (else to L1).
    set_panel_prefetch: *const fn (u32) callconv(.c) void,

    /// Binds the table to the symbols exported by one variant object.
    pub fn bind(comptime variant_name: []const u8) Table {
        var t: Table = undefined;
        inline for (@typeInfo(Table).@"struct".fields) |field| {
            @field(t, field.name) = @extern(field.type, .{ .name = "cfk_" ++ variant_name ++ "_" ++ field.name });
        }
        return t;
    }
};
