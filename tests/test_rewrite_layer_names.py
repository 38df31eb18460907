"""A pass's rewrite log names the layer each rewritten node belongs to, beside its id and builder name."""
import accelsim as A
from accelsim.passes.manager import optimize_with_log


def test_fuse_epilogue_names_the_layer_of_each_rewrite():
    fwd = A.models.build("mlp", batch=2, sizes=(8, 4, 2))
    _, log = optimize_with_log(fwd, ["fuse_epilogue"], verify=False)
    lines = [line for record in log.records for line in record.rewrites]
    assert [line.split(":")[0].split(" in ")[-1] for line in lines] == ["fc1", "fc2"], lines
