"""The pipeline-partitioning problem: data model, costs, generators and solve steps."""
