# The two commands of the README: `make demo` and `make test`. Both install what is missing.
.PHONY: setup build demo test bench format clean

setup:
	@bash scripts/setup.sh

build: setup
	cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
	cmake --build build -j

demo: build
	bash scripts/demo.sh

test: setup
	bash scripts/test.sh

bench: build
	bash bench/run.sh

format:
	clang-format -i $$(git ls-files '*.cc' '*.h')

clean:
	rm -rf build build-python build-asan build-tsan build-fuzz scratch
