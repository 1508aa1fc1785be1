"""What a measurement costs from a model's config alone: the accounting (:mod:`~depthutils.cost.accounting`),
the cost of the passes every measurement is made of (:mod:`~depthutils.cost.passes`), a model's shape and token
counter (:mod:`~depthutils.cost.model_info`), the working chunks (:mod:`~depthutils.cost.chunks`) and the batch
size that fits a memory budget (:mod:`~depthutils.cost.budget`). Each measurement states its own cost in its
module (``cost``), from these pieces."""
