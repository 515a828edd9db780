"""The check of Iceberg's Java API before the JVM catalog is used (iceberg_java.missing_java_api,
jvm_catalog.java_api_usable): a JVM whose Iceberg lacks an entry point is read through SQL."""

from types import SimpleNamespace

from dbt_incremental_mv.metadata import iceberg_java, jvm_catalog
from dbt_incremental_mv.process_state import PROCESS


class FakeJvm:
    """A py4j JVM view: ``classes`` maps a class name to its public method names."""

    def __init__(self, classes, version="1.99.0"):
        self.classes = classes
        thread = SimpleNamespace(getContextClassLoader=lambda: "loader")
        self.java = SimpleNamespace(lang=SimpleNamespace(Thread=SimpleNamespace(currentThread=lambda: thread),
                                                         Class=SimpleNamespace(forName=self.for_name)))
        self.org = SimpleNamespace(apache=SimpleNamespace(iceberg=SimpleNamespace(
            IcebergBuild=SimpleNamespace(version=lambda: version))))

    def for_name(self, name, initialize, loader):
        assert initialize is False and loader == "loader"
        if name not in self.classes:
            raise RuntimeError(f"java.lang.ClassNotFoundException: {name}")
        methods = [SimpleNamespace(getName=lambda m=m: m) for m in self.classes[name]]
        return SimpleNamespace(getMethods=lambda: methods)


def whole_api():
    return {name: list(methods) + ["hashCode"] for name, methods in iceberg_java.JAVA_API.items()}


def test_an_iceberg_with_the_whole_api_passes():
    assert iceberg_java.missing_java_api(FakeJvm(whole_api())) is None


def test_a_missing_class_or_method_is_named():
    classes = whole_api()
    del classes["org.apache.iceberg.spark.ScanTaskSetManager"]
    assert iceberg_java.missing_java_api(FakeJvm(classes)) == "org.apache.iceberg.spark.ScanTaskSetManager"
    classes = whole_api()
    classes["org.apache.iceberg.TableMetadata"] = ["buildFromEmpty"]
    assert iceberg_java.missing_java_api(FakeJvm(classes)) == "org.apache.iceberg.TableMetadata.buildFrom"


def test_a_jvm_lacking_the_api_is_read_through_sql_with_one_warning_naming_the_version(monkeypatch, caplog):
    monkeypatch.setattr(PROCESS, "java_api", {})
    classes = whole_api()
    del classes["org.apache.iceberg.spark.SparkTableCache"]
    lacking = SimpleNamespace(_jvm=FakeJvm(classes, version="1.12.0"))
    with caplog.at_level("WARNING", logger=jvm_catalog.logger.name):
        assert jvm_catalog.java_api_usable(lacking) is False
        assert jvm_catalog.java_api_usable(lacking) is False  # checked once per JVM
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1
    assert "Iceberg 1.12.0" in warnings[0] and "org.apache.iceberg.spark.SparkTableCache" in warnings[0]
    assert "through SQL" in warnings[0]
    assert jvm_catalog.java_api_usable(SimpleNamespace(_jvm=FakeJvm(whole_api()))) is True
