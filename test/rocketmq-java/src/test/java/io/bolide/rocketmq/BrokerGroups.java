package io.bolide.rocketmq;

import java.lang.annotation.ElementType;
import java.lang.annotation.Inherited;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * How many broker groups the cluster of a test class has (default 1). Classes asking for the same
 * number share one cluster for the run, unless dedicated: then the class has a cluster of its own,
 * stopped after its last test (for tests that restart brokers).
 */
@Retention(RetentionPolicy.RUNTIME)
@Target(ElementType.TYPE)
@Inherited
public @interface BrokerGroups {
    int value();

    boolean dedicated() default false;
}
