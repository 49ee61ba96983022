//! The tasks whose calls run on this node, with their open questions (see the parent module).
//! A leaf: it knows nothing of the node's state.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::mrtr::Inputs;

/// The tasks whose calls run on this node, with their questions.
#[derive(Default)]
pub struct TaskCalls(Mutex<HashMap<String, Arc<Inputs>>>);

impl TaskCalls {
    /// Task `task_id`'s call runs here with `inputs`.
    pub(crate) fn insert(&self, task_id: &str, inputs: Arc<Inputs>) {
        lock(&self.0).insert(task_id.to_owned(), inputs);
    }

    /// Task `task_id`'s call stopped running here.
    pub(crate) fn remove(&self, task_id: &str) {
        lock(&self.0).remove(task_id);
    }

    /// The questions of task `task_id`, when its call runs here.
    pub(crate) fn get(&self, task_id: &str) -> Option<Arc<Inputs>> {
        lock(&self.0).get(task_id).cloned()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
