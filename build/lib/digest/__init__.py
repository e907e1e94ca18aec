"""The digest: the folding store, the flush task and its beat schedule, and digest rendering."""
