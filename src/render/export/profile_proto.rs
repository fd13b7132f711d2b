//! The messages of pprof's `profile.proto` (github.com/google/pprof, proto/profile.proto), as
//! prost structs derived by hand: no protoc, no build script. Field numbers and types follow
//! the .proto; every string is an index into `string_table`, whose entry 0 is "".

/// A profile: samples of call stacks, with the locations, functions and mappings they name.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Profile {
    /// What each value of a sample counts (`samples/count`, `cpu/nanoseconds`).
    #[prost(message, repeated, tag = "1")]
    pub sample_type: Vec<ValueType>,
    /// The samples.
    #[prost(message, repeated, tag = "2")]
    pub sample: Vec<Sample>,
    /// Mapped binaries.
    #[prost(message, repeated, tag = "3")]
    pub mapping: Vec<Mapping>,
    /// Instruction addresses, with the functions they lie in.
    #[prost(message, repeated, tag = "4")]
    pub location: Vec<Location>,
    /// Functions.
    #[prost(message, repeated, tag = "5")]
    pub function: Vec<Function>,
    /// Every string the profile uses; entry 0 is "".
    #[prost(string, repeated, tag = "6")]
    pub string_table: Vec<String>,
    /// Regex of frames to drop (string index).
    #[prost(int64, tag = "7")]
    pub drop_frames: i64,
    /// Regex of frames to keep (string index).
    #[prost(int64, tag = "8")]
    pub keep_frames: i64,
    /// When the profile was taken, ns since the epoch (0: unknown).
    #[prost(int64, tag = "9")]
    pub time_nanos: i64,
    /// How long it was taken over, ns.
    #[prost(int64, tag = "10")]
    pub duration_nanos: i64,
    /// What one sampling period is (`cpu/nanoseconds`).
    #[prost(message, optional, tag = "11")]
    pub period_type: Option<ValueType>,
    /// The sampling period, in `period_type` units.
    #[prost(int64, tag = "12")]
    pub period: i64,
    /// Free-text comments (string indices).
    #[prost(int64, repeated, tag = "13")]
    pub comment: Vec<i64>,
    /// The sample type shown by default (string index of its type).
    #[prost(int64, tag = "14")]
    pub default_sample_type: i64,
}

/// A type and unit, as string indices.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ValueType {
    /// `samples`, `cpu`.
    #[prost(int64, tag = "1")]
    pub r#type: i64,
    /// `count`, `nanoseconds`.
    #[prost(int64, tag = "2")]
    pub unit: i64,
}

/// One call stack and its values.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Sample {
    /// Location ids, leaf first.
    #[prost(uint64, repeated, tag = "1")]
    pub location_id: Vec<u64>,
    /// One value per `sample_type`.
    #[prost(int64, repeated, tag = "2")]
    pub value: Vec<i64>,
    /// Labels (unused here).
    #[prost(message, repeated, tag = "3")]
    pub label: Vec<Label>,
}

/// A key and a string or numeric value.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Label {
    /// Key (string index).
    #[prost(int64, tag = "1")]
    pub key: i64,
    /// String value (string index).
    #[prost(int64, tag = "2")]
    pub str: i64,
    /// Numeric value.
    #[prost(int64, tag = "3")]
    pub num: i64,
    /// Unit of `num` (string index).
    #[prost(int64, tag = "4")]
    pub num_unit: i64,
}

/// A mapped binary: the addresses it covers and where they lie in its file.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Mapping {
    /// Id, from 1.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// First address covered.
    #[prost(uint64, tag = "2")]
    pub memory_start: u64,
    /// One past the last address covered.
    #[prost(uint64, tag = "3")]
    pub memory_limit: u64,
    /// File offset of `memory_start`.
    #[prost(uint64, tag = "4")]
    pub file_offset: u64,
    /// The file (string index).
    #[prost(int64, tag = "5")]
    pub filename: i64,
    /// Build id (string index).
    #[prost(int64, tag = "6")]
    pub build_id: i64,
    /// The locations in it are already symbolized (pprof does not look up the binary).
    #[prost(bool, tag = "7")]
    pub has_functions: bool,
    /// Source files are known.
    #[prost(bool, tag = "8")]
    pub has_filenames: bool,
    /// Source lines are known.
    #[prost(bool, tag = "9")]
    pub has_line_numbers: bool,
    /// Inlined frames are known.
    #[prost(bool, tag = "10")]
    pub has_inline_frames: bool,
}

/// An instruction address and the function(s) it lies in.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Location {
    /// Id, from 1.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// Its mapping's id (0: none).
    #[prost(uint64, tag = "2")]
    pub mapping_id: u64,
    /// The absolute address.
    #[prost(uint64, tag = "3")]
    pub address: u64,
    /// Functions at this address, innermost (inlined) first.
    #[prost(message, repeated, tag = "4")]
    pub line: Vec<Line>,
    /// Several frames folded into one.
    #[prost(bool, tag = "5")]
    pub is_folded: bool,
}

/// A function and a source line in it.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Line {
    /// The function's id.
    #[prost(uint64, tag = "1")]
    pub function_id: u64,
    /// Source line (0: unknown).
    #[prost(int64, tag = "2")]
    pub line: i64,
    /// Source column (0: unknown).
    #[prost(int64, tag = "3")]
    pub column: i64,
}

/// A function.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Function {
    /// Id, from 1.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// Name shown (string index).
    #[prost(int64, tag = "2")]
    pub name: i64,
    /// Name as the system knows it, mangled (string index).
    #[prost(int64, tag = "3")]
    pub system_name: i64,
    /// Source file (string index).
    #[prost(int64, tag = "4")]
    pub filename: i64,
    /// First source line (0: unknown).
    #[prost(int64, tag = "5")]
    pub start_line: i64,
}
