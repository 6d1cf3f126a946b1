"""The fidelity benchmark: labelled (parents, summary) pairs and the check's recall on them."""
