//! User tasks (`tasks`) with their rows in `task_list`.
//!
//! Invariant: an open user task has exactly one `task_list` row, removed
//! with the task.

use super::*;

impl Tables<'_> {
    /// An open user task.
    pub fn task(&self, id: u64) -> Result<Option<TaskRecord>, StoreError> {
        get_record(self.tasks.get()?, id)
    }

    /// Writes an open user task; a new one gets its `tasks_at` row and moves
    /// the open-task gauge of its element (element and creation never change).
    pub fn put_task(&mut self, rec: &TaskRecord) -> Result<(), StoreError> {
        self.touched.instance_written(rec.instance);
        if self.tasks.get()?.get(rec.id)?.is_none() {
            self.tasks_at
                .get_mut()?
                .insert((rec.element.as_str(), rec.created_at, rec.id), ())?;
            self.gauge(&format!("{OPEN_TASKS}{}", rec.element), true)?;
        }
        self.tasks
            .get_mut()?
            .insert(rec.id, codec::encode(rec)?.as_slice())?;
        Ok(())
    }

    /// User task `id` belongs to element `element` (named `name`) from now
    /// on (its instance migrated): assignee, candidates and dates stay, its
    /// row and gauge move.
    pub fn rename_task(
        &mut self,
        id: u64,
        element: &str,
        name: Option<String>,
    ) -> Result<(), StoreError> {
        let Some(mut rec) = self.task(id)? else {
            return Ok(());
        };
        self.remove_task(id)?;
        rec.element = element.to_string();
        rec.name = name;
        self.put_task(&rec)
    }

    /// Removes a user task (completed, or its token left) with its row and gauge.
    pub fn remove_task(&mut self, id: u64) -> Result<(), StoreError> {
        if let Some(rec) = self.task(id)? {
            self.touched.instance_written(rec.instance);
            self.tasks_at
                .get_mut()?
                .remove((rec.element.as_str(), rec.created_at, rec.id))?;
            self.gauge(&format!("{OPEN_TASKS}{}", rec.element), false)?;
        }
        self.tasks.get_mut()?.remove(id)?;
        Ok(())
    }
}
