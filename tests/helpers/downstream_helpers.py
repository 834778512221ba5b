"""Downstream tasks of the tests' own: one whose data only the hub has."""

HUB_TASK = """task: repro_hub
dataset_path: repro-tests/not-in-the-cache
output_type: multiple_choice
validation_split: validation
doc_to_text: "{{query}}"
doc_to_target: "{{label}}"
doc_to_choice: "{{choices}}"
"""
