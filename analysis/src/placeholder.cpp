// Placeholder so the target exists before its first real source lands; delete when one does.
