package io.bolide.rocketmq;

import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.ParameterContext;
import org.junit.jupiter.api.extension.ParameterResolutionException;
import org.junit.jupiter.api.extension.ParameterResolver;

/**
 * Gives tests a {@link BolideCluster}: one cluster per layout ({@link BrokerGroups}) for the whole
 * run, started on first use and stopped when the run ends (it lives in the root context's store). Tests keep apart by using
 * topics and groups of their own. A cluster that failed to start is not tried again: every later
 * test fails with the same cause at once.
 */
public final class BolideExtension implements ParameterResolver {

    private static final ExtensionContext.Namespace NS = ExtensionContext.Namespace.create(BolideExtension.class);

    /** The one start attempt of the run: the cluster, or why it did not start. */
    private static final class Started implements ExtensionContext.Store.CloseableResource {
        final BolideCluster cluster;
        final RuntimeException failure;

        Started(int groups, String label) {
            BolideCluster c = null;
            RuntimeException f = null;
            try {
                c = BolideCluster.start(groups, label);
            } catch (RuntimeException e) {
                f = e;
            }
            cluster = c;
            failure = f;
        }

        @Override
        public void close() {
            if (cluster != null) {
                cluster.close();
            }
        }
    }

    @Override
    public boolean supportsParameter(ParameterContext pc, ExtensionContext ec) {
        return pc.getParameter().getType() == BolideCluster.class;
    }

    @Override
    public Object resolveParameter(ParameterContext pc, ExtensionContext ec) throws ParameterResolutionException {
        BrokerGroups bg = ec.getRequiredTestClass().getAnnotation(BrokerGroups.class);
        int groups = bg == null ? 1 : bg.value();
        // A dedicated cluster lives in the class's store (closed after the class), a shared one in
        // the root's (closed after the run).
        ExtensionContext owner = bg != null && bg.dedicated() ? ec : ec.getRoot();
        String key = bg != null && bg.dedicated() ? "cluster-" + ec.getRequiredTestClass().getName() : "cluster-" + groups;
        String label = bg != null && bg.dedicated() ? ec.getRequiredTestClass().getSimpleName() : groups == 1 ? "" : groups + "-groups";
        Started s = owner.getStore(NS).getOrComputeIfAbsent(key, k -> new Started(groups, label), Started.class);
        if (s.failure != null) {
            throw new ParameterResolutionException("the Bolide cluster did not start", s.failure);
        }
        return s.cluster;
    }
}
