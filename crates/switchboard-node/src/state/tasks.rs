//! The tasks whose calls run on this node, with their open questions (see the parent module).
//! A leaf: it knows nothing of the node's state.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::mrtr::Inputs;

/// The tasks whose calls run on this node, with their questions.
#[derive(Default)]
pub struct TaskCalls(Mutex<HashMap<String, Arc<Inputs>>>);

impl TaskCalls {
    /// Task `task_id`'s call runs here with `inputs`.
    pub(crate) fn insert(&self, task_id: &str, inputs: Arc<Inputs>) {
        self.0.lock().insert(task_id.to_owned(), inputs);
    }

    /// Task `task_id`'s call stopped running here.
    pub(crate) fn remove(&self, task_id: &str) {
        self.0.lock().remove(task_id);
    }

    /// The questions of task `task_id`, when its call runs here.
    pub(crate) fn get(&self, task_id: &str) -> Option<Arc<Inputs>> {
        self.0.lock().get(task_id).cloned()
    }
}
