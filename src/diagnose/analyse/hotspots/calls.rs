//! Spin loops that re-read through a call (issue 28: `while (load_turn() != me) ;` with the
//! getter out of line): which function a loop's call reaches, and which samples were taken in
//! it under that call, so that the spin's share is its loop's and its callee's together.
//!
//! A direct call is followed to its target in the same module, which is decoded and judged
//! ([`disasm::load_only_leaf`]). A call the code does not resolve (through a PLT stub, a
//! register, a JIT's call table) is resolved by the sampled stacks: the functions sampled with
//! this call's return address as their caller. Without call stacks only direct calls resolve,
//! and which of a callee's samples its loop took is unknown, so none are claimed.

use super::{FuncAcc, SiteDecoder};
use crate::diagnose::analyse::disasm::{self, Callee, Insn, LeafLoad};
use crate::diagnose::analyse::runtimes;
use crate::diagnose::record::recording::Recording;
use crate::diagnose::symbolize::symbols::{Location, Symbol, Symbolizer};
use iced_x86::Register;
use std::collections::{BTreeMap, HashMap, HashSet};

/// A place in code: its module and an address in the module's numbering.
type Place = (String, u64);

/// Samples per thread.
type PerThread = BTreeMap<u32, u64>;

/// Longest callee read to judge it: a load-only leaf is at most eight instructions.
const MAX_LEAF_BYTES: u64 = 128;

/// The sampled stacks by the call they were taken under, and what each call reaches.
#[derive(Default)]
pub(super) struct UnderCalls {
    /// Leaves sampled right under a call (their caller frame is that call's return address),
    /// with their samples.
    leaves: HashMap<Place, HashMap<Location, u64>>,
    /// Return addresses under which a stack went two frames deep: the function called there
    /// called another, so it is no leaf.
    deeper: HashSet<Place>,
    /// Callees judged, by call instruction.
    judged: HashMap<Place, Option<Callee>>,
}

/// The registers a call may change under the System V x86-64 convention (caller-saved): what
/// a runtime's load function known only by name is taken to clobber. Fewer than a JIT's own
/// convention may clobber, so a value the loop keeps across the call is never taken for one
/// the call makes afresh.
const CALLER_SAVED: &[Register] = &[
    Register::RAX,
    Register::RCX,
    Register::RDX,
    Register::RSI,
    Register::RDI,
    Register::R8,
    Register::R9,
    Register::R10,
    Register::R11,
];

/// What a function's code is, for a spin that calls it.
enum Judged {
    /// A load-only leaf; `known_as` when a runtime's load function known by its name.
    Leaf(LeafLoad, Option<String>),
    /// A stub that jumps on (a PLT entry): what it reaches is elsewhere.
    Stub,
    /// Anything else, or unreadable.
    Other,
}

fn judge(symz: &mut Symbolizer, loc: &Location, sym: &Symbol) -> Judged {
    if let Some(what) = runtimes::load_function(&sym.name) {
        // Its arguments are pushed (V8's convention), so the loop's pushes are its address:
        // the loop checks them like any value it uses.
        let leaf = LeafLoad {
            load: String::new(),
            address_inputs: Vec::new(),
            clobbers: CALLER_SAVED.to_vec(),
        };
        return Judged::Leaf(leaf, Some(what.to_string()));
    }
    let len = if sym.size > 0 {
        sym.size.min(MAX_LEAF_BYTES)
    } else {
        MAX_LEAF_BYTES
    };
    let Some(code) = symz.code(loc, sym.addr, len) else {
        return Judged::Other;
    };
    let insns = disasm::decode(&code, sym.addr);
    if let Some(leaf) = disasm::load_only_leaf(&insns) {
        Judged::Leaf(leaf, None)
    } else if disasm::is_jump_stub(&insns) {
        Judged::Stub
    } else {
        Judged::Other
    }
}

impl UnderCalls {
    /// Indexes the sampled stacks (leaf first, callers at their return address minus one) by
    /// the return address of the leaf's caller, and of the one above it.
    pub(super) fn new(stacks: &HashMap<Vec<Location>, u64>, symz: &mut Symbolizer) -> Self {
        let mut under = UnderCalls::default();
        let mut returns_to = |loc: &Location| {
            let n = symz.name(loc);
            (n.module, n.address + 1)
        };
        for (locs, &n) in stacks {
            if let Some(caller) = locs.get(1) {
                *under
                    .leaves
                    .entry(returns_to(caller))
                    .or_default()
                    .entry(locs[0].clone())
                    .or_default() += n;
            }
            if let Some(caller) = locs.get(2) {
                under.deeper.insert(returns_to(caller));
            }
        }
        under
    }

    /// What `call`, an instruction of a function at `loc` in `module`, reaches when that is a
    /// load-only leaf.
    pub(super) fn callee(
        &mut self,
        symz: &mut Symbolizer,
        loc: &Location,
        module: &str,
        call: &Insn,
    ) -> Option<Callee> {
        let key = (module.to_string(), call.addr);
        if let Some(c) = self.judged.get(&key) {
            return c.clone();
        }
        let c = self.resolve(symz, loc, module, call);
        self.judged.insert(key, c.clone());
        c
    }

    fn resolve(
        &self,
        symz: &mut Symbolizer,
        loc: &Location,
        module: &str,
        call: &Insn,
    ) -> Option<Callee> {
        if let Some(sym) = call.call_target.and_then(|t| symz.function_at(loc, t)) {
            match judge(symz, loc, &sym) {
                Judged::Leaf(leaf, known_as) => {
                    return Some(Callee {
                        name: sym.name,
                        leaf,
                        known_as,
                    });
                }
                Judged::Other => return None,
                // A PLT entry: where it jumps, the stacks tell.
                Judged::Stub => {}
            }
        }
        let ret = (module.to_string(), call.end());
        if self.deeper.contains(&ret) {
            return None;
        }
        // The functions sampled under this call, most samples first; every one must be a
        // load-only leaf (or a stub passed through), and together they are the callee.
        let mut functions: HashMap<Place, (Symbol, Location, u64)> = HashMap::new();
        for (leaf, &n) in self.leaves.get(&ret)? {
            let named = symz.name(leaf);
            let sym = named.symbol?;
            functions
                .entry((named.module, sym.addr))
                .or_insert_with(|| (sym, leaf.clone(), 0))
                .2 += n;
        }
        let mut functions: Vec<(Symbol, Location, u64)> = functions.into_values().collect();
        functions.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.name.cmp(&b.0.name)));
        let mut found: Option<Callee> = None;
        for (sym, leaf_loc, _) in functions {
            match judge(symz, &leaf_loc, &sym) {
                Judged::Leaf(leaf, known_as) => match &mut found {
                    None => {
                        found = Some(Callee {
                            name: sym.name,
                            leaf,
                            known_as,
                        })
                    }
                    Some(c) => {
                        c.leaf.address_inputs.extend(leaf.address_inputs);
                        c.leaf.clobbers.extend(leaf.clobbers);
                    }
                },
                Judged::Stub => {}
                Judged::Other => return None,
            }
        }
        found
    }
}

/// Samples that spins through calls took in the functions they call, from the stacks.
#[derive(Debug, Default)]
pub(super) struct Claims {
    /// Call stacks were sampled: without them nothing is claimed.
    pub stacks: bool,
    /// Per callee address, per thread: taken off the callee's own sites.
    pub taken: HashMap<Place, PerThread>,
    /// Per spin call (its return address in the spin's module), per thread: added to the
    /// spin's site.
    pub by_call: HashMap<Place, PerThread>,
}

impl Claims {
    /// `f`'s samples per address and thread, less what spins' calls took.
    pub(super) fn remaining(&self, f: &FuncAcc) -> BTreeMap<u64, PerThread> {
        let mut ips = f.ips.clone();
        if self.taken.is_empty() {
            return ips;
        }
        for (ip, tids) in ips.iter_mut() {
            if let Some(taken) = self.taken.get(&(f.module.clone(), *ip)) {
                for (tid, n) in tids.iter_mut() {
                    *n = n.saturating_sub(taken.get(tid).copied().unwrap_or(0));
                }
                tids.retain(|_, n| *n > 0);
            }
        }
        ips.retain(|_, tids| !tids.is_empty());
        ips
    }
}

/// `n` of the samples at a location, split over its threads in proportion to theirs there
/// (stacks carry no thread): exact when one thread was sampled there, as in a spin's callee
/// that only its loop calls.
fn split(n: u64, at: Option<&PerThread>) -> PerThread {
    let Some(at) = at.filter(|t| !t.is_empty()) else {
        return PerThread::new();
    };
    let all: u64 = at.values().sum();
    let mut out: PerThread = at
        .iter()
        .map(|(&tid, &k)| (tid, n * k / all.max(1)))
        .collect();
    let short = n - out.values().sum::<u64>();
    if let Some((&busiest, _)) = at.iter().max_by_key(|(_, k)| **k) {
        *out.entry(busiest).or_default() += short;
    }
    out.retain(|_, k| *k > 0);
    out
}

fn add(to: &mut PerThread, from: &PerThread) {
    for (&tid, &n) in from {
        *to.entry(tid).or_default() += n;
    }
}

impl SiteDecoder<'_> {
    /// Finds the spins that re-read through calls among `funcs` and claims for them the
    /// samples taken under their calls. Run before the sites are made, so that a callee's own
    /// sites count only what its spin did not take.
    pub(super) fn claims(&mut self, funcs: &[&FuncAcc], rec: &Recording) -> Claims {
        let mut claims = Claims {
            stacks: rec.callchains,
            ..Claims::default()
        };
        if !rec.callchains {
            return claims;
        }
        let mut claimed_calls = HashSet::new();
        for f in funcs {
            let Ok((_, insns)) = self.code(f) else {
                continue;
            };
            let ip_counts = f
                .ips
                .iter()
                .map(|(&ip, tids)| (ip, tids.values().sum()))
                .collect();
            let (symz, under) = (&mut *self.symz, &mut self.under);
            let sites = disasm::analyze_with_callees(&insns, &ip_counts, &mut |c| {
                under.callee(symz, &f.loc, &f.module, c)
            });
            for call in sites.iter().flat_map(|s| &s.calls) {
                let key = (f.module.clone(), call.returns_to);
                if !claimed_calls.insert(key.clone()) {
                    continue; // one loop, two back edges: two sites, one call
                }
                for (leaf, &n) in self.under.leaves.get(&key).into_iter().flatten() {
                    let named = self.symz.name(leaf);
                    let per_thread = split(n, rec.samples.get(leaf));
                    add(
                        claims
                            .taken
                            .entry((named.module, named.address))
                            .or_default(),
                        &per_thread,
                    );
                    add(claims.by_call.entry(key.clone()).or_default(), &per_thread);
                }
            }
        }
        claims
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claimed_samples_split_over_threads_add_up_to_the_claim() {
        let at = BTreeMap::from([(1, 7), (2, 3)]);
        assert_eq!(split(10, Some(&at)), BTreeMap::from([(1, 7), (2, 3)]));
        let s = split(5, Some(&at));
        assert_eq!(s.values().sum::<u64>(), 5, "{s:?}");
        assert_eq!(split(4, Some(&BTreeMap::from([(9, 100)]))), [(9, 4)].into());
        assert!(split(4, None).is_empty());
    }
}
