# ringcheck/: the init-container binary (needs CUDA and NCCL under CUDA_HOME).
.PHONY: ringcheck
ringcheck:
	@echo "ringcheck: not built yet"
