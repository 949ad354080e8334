"""SavedModel export for TF Serving (see export/saved_model.py)."""
