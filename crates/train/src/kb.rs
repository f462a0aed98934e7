//! The knowledge base's shape that both its corpus and its probes rely on (a leaf: the
//! corpus states each entity's facts, the probes ask about them, and a record of probe
//! scores groups its items by entity).

/// Knowledge items per entity ([`crate::eval::ProbeSet::generate`]): its colour in three phrasings, its
/// kind in two, its neighbour in one. They are resampled together (they share facts).
pub const KNOWLEDGE_PER_ENTITY: usize = 6;
